-- Live shared holders and permits: ? key prefix and ? again ('' for all),
-- ? limit. Columns as in sql/postgres/holders_list.sql.
SELECT h.kind, h.lock_key, h.owner, h.token,
       CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), h.expires_at) / 1000),
       h.holder, h.note, s.permits
  FROM sqlock_holders h LEFT JOIN sqlock_semaphores s ON h.kind = 'P' AND s.name = h.lock_key
 WHERE LEFT(h.lock_key, LENGTH(?)) = ? AND h.expires_at > UTC_TIMESTAMP(6)
 ORDER BY h.kind, h.lock_key, h.acquired_at, h.owner
 LIMIT ?
