-- conditional_update release: ?1 key, ?2 owner.
UPDATE sqlock_locks SET owner = NULL, expires_ms = NULL WHERE lock_key = ?1 AND owner = ?2
