-- select_for_update's token: $1 key, $2 the key's counter as the holder's
-- transaction read it once the row was locked (lock_row.sql; 0: no fence
-- row yet). Called only by the session holding the key's row lock, so no
-- grant runs concurrently; committed at once, so a holder whose transaction
-- later dies has still consumed its token. row_lock_token tells fences
-- (sqlock_assert_held) that this grant holds the key by its row lock rather
-- than by a lease row.
--
-- Only from that counter: the row lock may have ended before this ran (the
-- server ended the transaction while this waited for a pooled connection),
-- and another client been granted the key since. Bumping past its token
-- would make its fences fail while its lease stays live, and a
-- select_for_update holder's ping would take it for a forced release. No
-- row: the counter moved, and this attempt is refused, drawing nothing.
INSERT INTO sqlock_fences AS f (lock_key, token, row_lock_token) VALUES ($1, 1, 1)
ON CONFLICT (lock_key) DO UPDATE SET token = f.token + 1, row_lock_token = f.token + 1
 WHERE f.token = $2
RETURNING token
