-- The watchdog's renewal of many leases in one statement: $1 is a JSON array
-- of {"k": key, "o": owner, "ms": lease}. Returns the owners renewed. A row
-- another transaction has locked is skipped, not waited for, so that one
-- locked row cannot fail the whole batch; the watchdog renews every lease
-- missing from the result alone, which tells a lost lease (taken over,
-- deleted, expired) from a locked one.
--
-- The rows the batch can lock are found and locked once (MATERIALIZED),
-- each with its lease, and the update then looks each one up by key. Written
-- as `lock_key IN (SELECT ... FOR UPDATE SKIP LOCKED)`, the planner could pick
-- a semi join that re-ran the locking subquery for every lease of the batch
-- once the lock table was large (500 leases: 125,250 index scans, 160 ms of
-- server CPU per batch instead of a few).
WITH locked AS MATERIALIZED (
    SELECT s.lock_key, b.o, b.ms
      FROM sqlock_locks s
      JOIN jsonb_to_recordset($1::jsonb) AS b(k text, o text, ms bigint) ON s.lock_key = b.k
       FOR UPDATE OF s SKIP LOCKED
)
UPDATE sqlock_locks AS l
   SET expires_at = clock_timestamp() + locked.ms * interval '1 millisecond'
  FROM locked
 WHERE l.lock_key = locked.lock_key AND l.owner = locked.o AND l.expires_at > clock_timestamp()
RETURNING l.owner
