-- Shared grant, step 2: ?1 key. The fence row a shared holder's token is read
-- from (token 0 before any exclusive grant), so that fences find it.
INSERT OR IGNORE INTO sqlock_fences (lock_key, token) VALUES (?1, 0)
