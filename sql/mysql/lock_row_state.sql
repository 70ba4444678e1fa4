-- select_for_update, when lock_row.sql matched nothing: ? key. Whether the
-- key has a row at all, the holder's remaining lease, and whether the key is
-- lean (migrations/mysql/0014_lean_grants.sql), read without locking.
SELECT l.lock_key IS NOT NULL AS present,
       GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), l.expires_at) / 1000)) AS remaining_ms,
       COALESCE(l.lean, FALSE) AS lean
  FROM (SELECT 1) AS one LEFT JOIN sqlock_locks l ON l.lock_key = ?
