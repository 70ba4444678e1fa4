-- The keys with live waiters, longest queue first: $1 limit. Per key: its
-- live waiters, and how long (ms) the one queued longest has waited.
WITH n AS (SELECT clock_timestamp() AS t)
SELECT w.lock_key, count(*),
       floor(extract(epoch FROM (n.t - min(w.enqueued_at))) * 1000)::bigint
  FROM sqlock_waiters w, n
 WHERE w.expires_at > n.t
 GROUP BY w.lock_key, n.t
 ORDER BY count(*) DESC, min(w.enqueued_at), w.lock_key
 LIMIT $1
