-- The watchdog's heartbeat of waiter rows: $1 is a JSON array of
-- {"t": ticket, "ms": lease}. An expired row is not revived (others may have
-- passed it): its waiter queues again at the back. The commit does not wait
-- for the disk, as in enqueue.sql.
UPDATE sqlock_waiters AS w
   SET expires_at = clock_timestamp() + b.ms * interval '1 millisecond'
  FROM jsonb_to_recordset($1::jsonb) AS b(t bigint, ms bigint)
 WHERE w.ticket = b.t AND w.expires_at > clock_timestamp()
   AND (SELECT set_config('synchronous_commit', 'off', true)) IS NOT NULL
RETURNING w.ticket
