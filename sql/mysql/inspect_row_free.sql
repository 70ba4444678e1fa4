-- ? key. Returns the row only when no transaction holds its lock.
SELECT 1 FROM sqlock_locks WHERE lock_key = ? LOCK IN SHARE MODE SKIP LOCKED
