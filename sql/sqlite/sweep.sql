-- Deletes up to ?1 expired unique_insert rows (SQLite has one writer, so
-- concurrent sweepers simply take turns). Fence rows are never touched.
DELETE FROM sqlock_locks
 WHERE lock_key IN (SELECT lock_key FROM sqlock_locks
                     WHERE mode = 'unique_insert'
                       AND expires_ms <= sqlock_now_ms()
                     LIMIT ?1)
