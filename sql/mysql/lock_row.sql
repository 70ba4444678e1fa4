-- select_for_update: ? key, ? key, ? priority, ? priority, ? ticket,
-- ? priority, ? ticket. Runs
-- inside the holder's transaction; one matched row means the row is ours.
--
-- The row is locked only when it is free: no committed lease is live on it
-- and no live waiter is ahead (as in migrations/mysql/0008_leaner_grant.sql),
-- and it is not lean (a lean key's counter is in the lock row, which the
-- holder's rollback would undo: the caller clears the flag first, through
-- sqlock_unlean, and tries again). An UPDATE, not SELECT ... FOR UPDATE:
-- under READ COMMITTED an UPDATE lets go of a row its WHERE rejects at once,
-- while a locking SELECT keeps it, so a requester stalled before its ROLLBACK
-- would keep a lease holder's renewals waiting. A lock wait of 0 makes a row
-- another transaction has locked an immediate error 1205, like NOWAIT.
SET STATEMENT innodb_lock_wait_timeout = 0 FOR
UPDATE sqlock_locks SET expires_at = expires_at
 WHERE lock_key = ? AND (owner IS NULL OR expires_at <= UTC_TIMESTAMP(6)) AND NOT lean
   AND NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = ? AND w.kind <> 'P' AND w.expires_at > UTC_TIMESTAMP(6)
                      AND IF(w.fair, w.priority > ? OR (w.priority = ? AND w.ticket < ?),
                             ? = -9223372036854775808 AND w.ticket < ?
                             AND w.enqueued_at <= UTC_TIMESTAMP(6) - INTERVAL 2000 MICROSECOND))
