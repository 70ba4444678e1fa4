-- select_for_update's token: $1 key. Called only by the session holding the
-- key's row lock, so no grant runs concurrently; committed at once, so a
-- holder whose transaction later dies has still consumed its token.
-- row_lock_token tells fences (sqlock_assert_held) that this grant holds the
-- key by its row lock rather than by a lease row.
INSERT INTO sqlock_fences AS f (lock_key, token, row_lock_token) VALUES ($1, 1, 1)
ON CONFLICT (lock_key) DO UPDATE SET token = f.token + 1, row_lock_token = f.token + 1
RETURNING token
