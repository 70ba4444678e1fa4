-- $1 key: create the key's row, free, so select_for_update has a row to lock.
INSERT INTO sqlock_locks (lock_key) VALUES ($1) ON CONFLICT DO NOTHING
