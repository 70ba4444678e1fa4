-- Sweeper, step 2: the keys step 1 locked (the KEYS marker becomes "?, ?, ..."),
-- re-checking expiry. Fence rows are never touched, so tokens cannot go backwards.
DELETE FROM sqlock_locks
 WHERE lock_key IN (/*KEYS*/) AND mode = 'unique_insert' AND expires_at <= UTC_TIMESTAMP(6)
