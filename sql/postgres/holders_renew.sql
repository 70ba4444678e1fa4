-- The watchdog's renewal of shared holders and permits in one statement: $1
-- is a JSON array of {"k": key, "o": owner, "ms": lease, "t": 'S' or 'P'}.
-- Returns the owners renewed. A shared holder is renewed together with its
-- key's row (expires_at raised to at least the holder's new expiry), locked
-- first and skipped when another transaction has it (a grant or a release of
-- the key): the watchdog then renews that holder alone, later.
WITH b AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS b(k text, o text, ms bigint, t text)
), lockable AS (
    SELECT l.lock_key FROM sqlock_locks l
     WHERE l.lock_key IN (SELECT k FROM b WHERE t = 'S') AND l.owner = 'shared' AND l.mode = 'shared'
       FOR UPDATE SKIP LOCKED
), renewed AS (
    UPDATE sqlock_holders h SET expires_at = clock_timestamp() + b.ms * interval '1 millisecond'
      FROM b
     WHERE h.kind = b.t AND h.lock_key = b.k AND h.owner = b.o AND h.expires_at > clock_timestamp()
       AND (b.t = 'P' OR h.lock_key IN (SELECT lock_key FROM lockable))
    RETURNING h.kind, h.lock_key, h.owner, h.expires_at
), raised AS (
    UPDATE sqlock_locks l SET expires_at = greatest(l.expires_at, r.until)
      FROM (SELECT lock_key, max(expires_at) AS until FROM renewed WHERE kind = 'S' GROUP BY lock_key) r
     WHERE l.lock_key = r.lock_key
)
SELECT owner FROM renewed
