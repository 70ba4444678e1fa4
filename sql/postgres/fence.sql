-- Fences the calling transaction: $1 key, $2 token. Raises SQLSTATE SQ001
-- unless that lease holds the key; see migrations/postgres/0003_jobs.sql.
SELECT sqlock_assert_held($1, $2)
