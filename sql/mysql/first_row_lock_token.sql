-- select_for_update's first token of a key never granted before: ? key
-- (bump_row_lock_token.sql). A duplicate key means another client was
-- granted the key since its row was locked: refused, nothing drawn.
INSERT INTO sqlock_fences (lock_key, token, row_lock_token, row_lock_grants) VALUES (?, 1, 1, 1)
