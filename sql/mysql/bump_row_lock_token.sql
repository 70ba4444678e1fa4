-- select_for_update's token: ? key. Called only by the session holding the
-- key's row lock, and committed at once (see bump_token.sql). row_lock_token
-- tells fences (sqlock_assert_held) that this grant holds the key by its row
-- lock rather than by a lease row. MariaDB assigns left to right, so
-- row_lock_token takes the bumped value. The row lock was taken only while
-- the key was not lean, so the fence row's counter is the key's
-- (migrations/mysql/0014_lean_grants.sql); row_lock_grants tells the fence
-- row's triggers that this is not an older library's bump.
INSERT INTO sqlock_fences (lock_key, token, row_lock_token, row_lock_grants) VALUES (?, 1, 1, 1)
ON DUPLICATE KEY UPDATE token = token + 1, row_lock_token = token, row_lock_grants = row_lock_grants + 1
RETURNING token
