-- select_for_update's token: ? key, ? the key's counter as the holder's
-- transaction read it once the row was locked (read_token.sql, at least 1;
-- first_row_lock_token.sql makes the first). Called only by the session
-- holding the key's row lock, and committed at once (see bump_token.sql).
-- row_lock_token tells fences (sqlock_assert_held) that this grant holds the
-- key by its row lock rather than by a lease row. MariaDB assigns left to
-- right, so row_lock_token takes the bumped value. The row lock was taken
-- only while the key was not lean, so the fence row's counter is the key's
-- (migrations/mysql/0014_lean_grants.sql), and every grant made since by
-- another client moved it: a lean one only after a grant through
-- sqlock_grant set the flag, bumping it. row_lock_grants tells the fence
-- row's triggers that this is not an older library's bump.
--
-- Only from that counter: the row lock may have ended before this ran, and
-- another client been granted the key since (sql/postgres/bump_token.sql).
-- No row matched: this attempt is refused, drawing nothing.
UPDATE sqlock_fences SET token = token + 1, row_lock_token = token, row_lock_grants = row_lock_grants + 1
 WHERE lock_key = ? AND token = ?
