-- The watchdog's renewal of many leases in one statement: $1 is a JSON array
-- of {"k": key, "o": owner, "ms": lease}. Returns the owners renewed. A row
-- another transaction has locked is skipped, not waited for, so that one
-- locked row cannot fail the whole batch; the watchdog renews every lease
-- missing from the result alone, which tells a lost lease (taken over,
-- deleted, expired) from a locked one.
UPDATE sqlock_locks AS l
   SET expires_at = clock_timestamp() + b.ms * interval '1 millisecond'
  FROM jsonb_to_recordset($1::jsonb) AS b(k text, o text, ms bigint)
 WHERE l.lock_key = b.k AND l.owner = b.o AND l.expires_at > clock_timestamp()
   AND l.lock_key IN (SELECT s.lock_key FROM sqlock_locks s
                       WHERE s.lock_key IN (SELECT k FROM jsonb_to_recordset($1::jsonb) AS x(k text))
                         FOR UPDATE SKIP LOCKED)
RETURNING l.owner
