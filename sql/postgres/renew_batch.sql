-- The watchdog's renewal of many leases in one statement: $1 is a JSON array
-- of {"k": key, "o": owner, "ms": lease}. Returns the owners renewed; a lease
-- missing from the result was taken over, deleted or had expired.
UPDATE sqlock_locks AS l
   SET expires_at = clock_timestamp() + b.ms * interval '1 millisecond'
  FROM jsonb_to_recordset($1::jsonb) AS b(k text, o text, ms bigint)
 WHERE l.lock_key = b.k AND l.owner = b.o AND l.expires_at > clock_timestamp()
RETURNING l.owner
