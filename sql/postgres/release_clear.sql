-- conditional_update release: $1 key, $2 owner. The row stays for the next grant.
UPDATE sqlock_locks SET owner = NULL, expires_at = NULL WHERE lock_key = $1 AND owner = $2
