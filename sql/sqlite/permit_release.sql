-- Permit release: ?1 name, ?2 owner. Returns whether the permit was live.
DELETE FROM sqlock_holders WHERE kind = 'P' AND lock_key = ?1 AND owner = ?2
RETURNING expires_ms > sqlock_now_ms()
