-- select_for_update, after the holder's rollback: $1 key. Wakes the next
-- waiter as release_delete.sql does (a NOTIFY on the channel of the client
-- whose live waiter heads the queue); the rollback could not carry it.
SELECT pg_notify(w.listener, w.ticket::text) FROM sqlock_waiters w
 WHERE w.lock_key = $1 AND w.listener IS NOT NULL AND w.expires_at > clock_timestamp()
 ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1
