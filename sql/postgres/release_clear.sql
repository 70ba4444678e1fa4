-- conditional_update release: $1 key, $2 owner. The row stays for the next
-- grant; the next waiter is woken, and the commit does not wait for the
-- disk, as in release_delete.sql.
-- A waiter's channel is never '' here (pg_notify('') fails, and the release
-- with it), not even one an older library stored for a pooled client's
-- reader or permit waiter (holder_enqueue.sql).
WITH unflushed AS (
    SELECT set_config('synchronous_commit', 'off', true)
), released AS (
    UPDATE sqlock_locks SET owner = NULL, expires_at = NULL WHERE lock_key = $1 AND owner = $2 RETURNING lock_key
)
SELECT (SELECT count(*) FROM released) AS released,
       (SELECT pg_notify(w.listener, w.ticket::text) FROM sqlock_waiters w
         WHERE w.lock_key = $1 AND w.kind <> 'P' AND w.listener <> '' AND w.expires_at > clock_timestamp()
           AND EXISTS (SELECT 1 FROM released)
         ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1) IS NOT NULL AS woke,
       (SELECT count(*) FROM unflushed) AS unflushed
