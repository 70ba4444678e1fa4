-- Break-glass release, first step: ? key. Whether the key has a live lease
-- row, read without locking: a select_for_update holder keeps the row locked,
-- and an UPDATE by primary key would wait for it.
SELECT 1 FROM sqlock_locks WHERE lock_key = ? AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
