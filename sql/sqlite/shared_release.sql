-- Shared release, step 1: ?1 key, ?2 owner. Returns whether the lease was live.
DELETE FROM sqlock_holders WHERE kind = 'S' AND lock_key = ?1 AND owner = ?2
RETURNING expires_ms > sqlock_now_ms()
