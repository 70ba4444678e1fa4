-- Sweeper, step 1 in a transaction: lock up to ? expired unique_insert rows,
-- skipping rows other transactions hold (grants, select_for_update holders,
-- other sweepers).
SELECT lock_key FROM sqlock_locks
 WHERE mode = 'unique_insert' AND expires_at <= UTC_TIMESTAMP(6)
 LIMIT ? FOR UPDATE SKIP LOCKED
