-- A waiter takes a ticket: $1 key, $2 owner, $3 fair, $4 priority, $5 lease
-- ms (the row expires unless heartbeated), $6 listener channel ('' when the
-- client does not listen: through a transaction pool it polls, and a release
-- must not NOTIFY an empty channel name), $7 holder.
--
-- The commit does not wait for the disk (synchronous_commit = off for this
-- transaction), nor do the queue's other writes: a queue row orders waiters
-- and plays no part in exclusion or tokens. One lost in a crash costs its
-- waiter its place: the heartbeat finds it gone (beat_waiters.sql) and the
-- waiter queues again at the back.
WITH unflushed AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_at, listener, holder)
SELECT $1::text, $2::text, $3::boolean, $4::integer, clock_timestamp() + $5::bigint * interval '1 millisecond',
       NULLIF($6::text, ''), $7::text
  FROM unflushed
RETURNING ticket
