-- Shared release, step 2: ?1 key. The key's row expires with the latest live
-- reader, or is freed when none is left.
UPDATE sqlock_locks
   SET expires_ms = (SELECT max(expires_ms) FROM sqlock_holders
                      WHERE kind = 'S' AND lock_key = ?1 AND expires_ms > sqlock_now_ms()),
       owner = CASE WHEN EXISTS (SELECT 1 FROM sqlock_holders
                                  WHERE kind = 'S' AND lock_key = ?1 AND expires_ms > sqlock_now_ms())
                    THEN owner END
 WHERE lock_key = ?1 AND owner = 'shared' AND mode = 'shared'
