-- Shared grant, step 2: ?1 key, ?2 owner, ?3 lease ms, ?4 holder, ?5 note.
-- The reader's token is its group's, from the row step 1 took. Its lease
-- ends no later than that row's: the clock has moved on since step 1 read it
-- (by a millisecond, or more when the thread was preempted), and a reader's
-- row that outlived the key's row was a live reader under a writer once the
-- key's row expired. Step 1 has just set the row's expiry (never NULL).
INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_ms, acquired_ms, holder, note)
SELECT 'S', ?1, ?2, token, min(sqlock_now_ms() + ?3, expires_ms), sqlock_now_ms(), ?4, ?5 FROM sqlock_locks
 WHERE lock_key = ?1
RETURNING token
