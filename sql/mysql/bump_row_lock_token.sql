-- select_for_update's token: ? key. Called only by the session holding the
-- key's row lock, and committed at once (see bump_token.sql). row_lock_token
-- tells fences (sqlock_assert_held) that this grant holds the key by its row
-- lock rather than by a lease row. MariaDB assigns left to right, so
-- row_lock_token takes the bumped value.
INSERT INTO sqlock_fences (lock_key, token, row_lock_token) VALUES (?, 1, 1)
ON DUPLICATE KEY UPDATE token = token + 1, row_lock_token = token
RETURNING token
