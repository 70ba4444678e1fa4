-- The keys with live waiters, longest queue first: ? limit. Per key: its
-- live waiters, and how long (ms) the one queued longest has waited.
SELECT lock_key, COUNT(*),
       FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(enqueued_at), UTC_TIMESTAMP(6)) / 1000)
  FROM sqlock_waiters
 WHERE expires_at > UTC_TIMESTAMP(6)
 GROUP BY lock_key
 ORDER BY COUNT(*) DESC, MIN(enqueued_at), lock_key
 LIMIT ?
