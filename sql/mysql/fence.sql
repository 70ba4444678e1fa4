-- Fences the calling transaction: ? key, ? token. Signals SQLSTATE 45000 with
-- a message starting "sqlock:" unless that lease holds the key; see
-- migrations/mysql/0003_jobs.sql.
SELECT sqlock_assert_held(?, ?)
