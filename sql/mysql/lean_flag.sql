-- Whether the key is lean (migrations/mysql/0014_lean_grants.sql): ? key.
-- Read without locking: a select_for_update holder keeps the row locked.
-- 0 for a key without a row.
SELECT COALESCE(MAX(lean), 0) FROM sqlock_locks WHERE lock_key = ?
