-- $1 key. row_locked: a select_for_update holder (or a statement in flight)
-- holds the row; SKIP LOCKED answers without waiting.
SELECT k.key,
       l.owner, l.mode, l.holder, l.note,
       CASE WHEN l.owner IS NOT NULL AND l.expires_at > clock_timestamp()
            THEN ceil(extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000)::bigint END AS remaining_ms,
       coalesce((SELECT token FROM sqlock_fences WHERE lock_key = $1), 0) AS token,
       l.lock_key IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM sqlock_locks s WHERE s.lock_key = $1 FOR SHARE SKIP LOCKED) AS row_locked
  FROM (SELECT $1::text AS key) k LEFT JOIN sqlock_locks l ON l.lock_key = k.key
