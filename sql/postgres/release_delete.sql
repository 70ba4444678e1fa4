-- unique_insert release: $1 key, $2 owner. Also wakes the next waiter: a
-- NOTIFY (delivered at commit) on the channel of the client whose waiter
-- heads the queue — fair waiters first, by priority then ticket — so one
-- client wakes, not every waiting one.
--
-- The commit does not wait for the disk (synchronous_commit = off for this
-- transaction only): a release lost in a crash leaves the key held until its
-- lease runs out, as a crashed holder would, and never lets two parties in.
-- A grant that sees the release commits after it in the WAL and waits for
-- its own flush, which covers the release too: no acknowledged grant
-- depends on a release the disk does not have.
-- A waiter's channel is never '' here (pg_notify('') fails, and the release
-- with it), not even one an older library stored for a pooled client's
-- reader or permit waiter (holder_enqueue.sql).
WITH unflushed AS (
    SELECT set_config('synchronous_commit', 'off', true)
), released AS (
    DELETE FROM sqlock_locks WHERE lock_key = $1 AND owner = $2 RETURNING lock_key
)
SELECT (SELECT count(*) FROM released) AS released,
       (SELECT pg_notify(w.listener, w.ticket::text) FROM sqlock_waiters w
         WHERE w.lock_key = $1 AND w.kind <> 'P' AND w.listener <> '' AND w.expires_at > clock_timestamp()
           AND EXISTS (SELECT 1 FROM released)
         ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1) IS NOT NULL AS woke,
       (SELECT count(*) FROM unflushed) AS unflushed
