-- select_for_update's token: $1 key. Called only by the session holding the
-- key's row lock, so no grant runs concurrently; committed at once, so a
-- holder whose transaction later dies has still consumed its token.
INSERT INTO sqlock_fences AS f (lock_key, token) VALUES ($1, 1)
ON CONFLICT (lock_key) DO UPDATE SET token = f.token + 1
RETURNING token
