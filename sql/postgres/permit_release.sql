-- Permit release: $1 name, $2 owner. Returns whether a live permit was
-- given back, and wakes the semaphore's head waiter (delivered at commit).
-- The commit does not wait for the disk, as in release_delete.sql.
-- A waiter's channel is never '' here (pg_notify('') fails, and the release
-- with it), not even one an older library stored for a pooled client's
-- reader or permit waiter (holder_enqueue.sql).
WITH unflushed AS (
    SELECT set_config('synchronous_commit', 'off', true)
), released AS (
    DELETE FROM sqlock_holders WHERE kind = 'P' AND lock_key = $1 AND owner = $2
    RETURNING expires_at > clock_timestamp() AS live
)
SELECT coalesce((SELECT bool_or(live) FROM released), false),
       (SELECT pg_notify(w.listener, w.ticket::text) FROM sqlock_waiters w
         WHERE w.lock_key = $1 AND w.kind = 'P' AND w.listener <> '' AND w.expires_at > clock_timestamp()
           AND EXISTS (SELECT 1 FROM released)
         ORDER BY w.fair DESC, w.priority DESC, w.ticket LIMIT 1) IS NOT NULL,
       (SELECT count(*) FROM unflushed)
