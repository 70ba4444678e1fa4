-- conditional_update release: ? key, ? owner.
UPDATE sqlock_locks SET owner = NULL, expires_at = NULL WHERE lock_key = ? AND owner = ?
