-- ? key: create the key's row, free, so select_for_update has a row to lock.
INSERT IGNORE INTO sqlock_locks (lock_key) VALUES (?)
