-- select_for_update, when lock_row.sql matched nothing: ? key. Whether the
-- key has a row at all, and the holder's remaining lease, read without locking.
SELECT l.lock_key IS NOT NULL AS present,
       GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), l.expires_at) / 1000)) AS remaining_ms
  FROM (SELECT 1) AS one LEFT JOIN sqlock_locks l ON l.lock_key = ?
