-- Break-glass release, last step (same transaction): ? key, ? key. Bumps the
-- key's fencing counter past both the fence row's and the lock row's (which
-- runs ahead while the key is lean; read without locking: a select_for_update
-- holder keeps that row locked), so every fence of the current holder fails
-- from now on. Matches nothing when the key was never granted.
UPDATE sqlock_fences
   SET token = GREATEST(token, COALESCE((SELECT l.token FROM sqlock_locks l WHERE l.lock_key = ?), 0)) + 1
 WHERE lock_key = ?
