-- Live waiters: ? key prefix and ? again ('' for all), ? limit. Per key in
-- the order the queue grants them: fair waiters by priority, then arrival;
-- then the rest.
SELECT w.lock_key, w.ticket, w.owner, w.holder, w.fair, w.priority,
       FLOOR(TIMESTAMPDIFF(MICROSECOND, w.enqueued_at, UTC_TIMESTAMP(6)) / 1000),
       CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), w.expires_at) / 1000)
  FROM sqlock_waiters w
 WHERE LEFT(w.lock_key, LENGTH(?)) = ? AND w.expires_at > UTC_TIMESTAMP(6)
 ORDER BY w.lock_key, w.fair DESC, w.priority DESC, w.ticket
 LIMIT ?
