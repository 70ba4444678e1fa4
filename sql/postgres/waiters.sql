-- Live waiters: $1 key prefix ('' for all), $2 limit. Per key in the order
-- the queue grants them: fair waiters by priority, then arrival; then the rest.
SELECT w.lock_key, w.ticket, w.owner, w.holder, w.fair, w.priority,
       floor(extract(epoch FROM (clock_timestamp() - w.enqueued_at)) * 1000)::bigint,
       ceil(extract(epoch FROM (w.expires_at - clock_timestamp())) * 1000)::bigint
  FROM sqlock_waiters w
 WHERE starts_with(w.lock_key, $1) AND w.expires_at > clock_timestamp()
 ORDER BY w.lock_key, w.fair DESC, w.priority DESC, w.ticket
 LIMIT $2
