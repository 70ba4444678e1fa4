-- The keys with live waiters, longest queue first: ?1 limit. Per key: its
-- live waiters, and how long (ms) the one queued longest has waited.
WITH n AS (SELECT sqlock_now_ms() AS ms)
SELECT w.lock_key, count(*), n.ms - min(w.enqueued_ms)
  FROM sqlock_waiters w, n
 WHERE w.expires_ms > n.ms
 GROUP BY w.lock_key
 ORDER BY count(*) DESC, min(w.enqueued_ms), w.lock_key
 LIMIT ?1
