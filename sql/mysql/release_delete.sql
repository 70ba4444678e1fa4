-- unique_insert release: ? key, ? owner.
DELETE FROM sqlock_locks WHERE lock_key = ? AND owner = ?
