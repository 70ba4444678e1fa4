-- Shared grant, step 2: ?1 key, ?2 owner, ?3 lease ms, ?4 holder, ?5 note.
-- The reader's token is its group's, from the row step 1 took.
INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_ms, acquired_ms, holder, note)
SELECT 'S', ?1, ?2, token, sqlock_now_ms() + ?3, sqlock_now_ms(), ?4, ?5 FROM sqlock_locks WHERE lock_key = ?1
RETURNING token
