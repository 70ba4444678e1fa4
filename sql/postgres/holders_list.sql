-- Live shared holders and permits: $1 key prefix ('' for all), $2 limit.
-- Columns: kind, key, owner, token, remaining ms, holder, note, the
-- semaphore's limit (permits; NULL for shared holders).
SELECT h.kind, h.lock_key, h.owner, h.token,
       ceil(extract(epoch FROM (h.expires_at - clock_timestamp())) * 1000)::bigint,
       h.holder, h.note, s.permits
  FROM sqlock_holders h LEFT JOIN sqlock_semaphores s ON h.kind = 'P' AND s.name = h.lock_key
 WHERE starts_with(h.lock_key, $1) AND h.expires_at > clock_timestamp()
 ORDER BY h.kind, h.lock_key, h.acquired_at, h.owner
 LIMIT $2
