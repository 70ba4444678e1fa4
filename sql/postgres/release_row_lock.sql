-- select_for_update release: $1 key. Runs inside the holder's transaction,
-- just before its COMMIT. Wakes the next waiter as release_delete.sql does (a
-- NOTIFY on the channel of the client whose live waiter heads the queue):
-- NOTIFY is delivered at commit, so that client hears of the release as the
-- row lock ends. The transaction wrote nothing but its row lock, so the
-- commit does not wait for the disk.
-- A waiter's channel is never '' here (pg_notify('') fails, and the release
-- with it), not even one an older library stored for a pooled client's
-- reader or permit waiter (holder_enqueue.sql).
SELECT set_config('synchronous_commit', 'off', true),
       (SELECT pg_notify(w.listener, w.ticket::text) FROM sqlock_waiters w
         WHERE w.lock_key = $1 AND w.kind <> 'P' AND w.listener <> '' AND w.expires_at > clock_timestamp()
         ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1)
