-- Live waiters: ?1 key prefix ('' for all), ?2 limit. Per key in the order
-- the queue grants them: fair waiters by priority, then arrival; then the rest.
SELECT lock_key, ticket, owner, holder, fair, priority,
       sqlock_now_ms() - enqueued_ms, expires_ms - sqlock_now_ms()
  FROM sqlock_waiters
 WHERE substr(lock_key, 1, length(?1)) = ?1 AND expires_ms > sqlock_now_ms()
 ORDER BY lock_key, fair DESC, priority DESC, ticket
 LIMIT ?2
