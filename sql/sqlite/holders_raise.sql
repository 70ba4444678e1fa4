-- Renewal, step 2: ?1 the same JSON array. Each shared key's row expires no
-- earlier than its latest live reader.
UPDATE sqlock_locks
   SET expires_ms = max(expires_ms, (SELECT max(h.expires_ms) FROM sqlock_holders h
                                      WHERE h.kind = 'S' AND h.lock_key = sqlock_locks.lock_key))
 WHERE lock_key IN (SELECT value ->> 'k' FROM json_each(?1) WHERE value ->> 't' = 'S')
   AND owner = 'shared' AND mode = 'shared'
