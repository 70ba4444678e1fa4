-- A waiter that timed out, was cancelled or failed leaves the queue: $1 ticket.
-- The commit does not wait for the disk, as in enqueue.sql.
DELETE FROM sqlock_waiters
 WHERE ticket = $1 AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
