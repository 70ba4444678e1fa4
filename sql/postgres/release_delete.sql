-- unique_insert release: $1 key, $2 owner.
DELETE FROM sqlock_locks WHERE lock_key = $1 AND owner = $2
