-- Live shared holders and permits: ?1 key prefix ('' for all), ?2 limit.
-- Columns as in sql/postgres/holders_list.sql.
SELECT h.kind, h.lock_key, h.owner, h.token, h.expires_ms - sqlock_now_ms(), h.holder, h.note, s.permits
  FROM sqlock_holders h LEFT JOIN sqlock_semaphores s ON h.kind = 'P' AND s.name = h.lock_key
 WHERE substr(h.lock_key, 1, length(?1)) = ?1 AND h.expires_ms > sqlock_now_ms()
 ORDER BY h.kind, h.lock_key, h.acquired_ms, h.owner
 LIMIT ?2
