-- A shared or permit waiter takes a ticket: $1 key, $2 owner, $3 fair, $4
-- priority, $5 lease ms, $6 listener, $7 holder, $8 kind ('S' or 'P'). The
-- commit does not wait for the disk, as in enqueue.sql. No listener (a client
-- behind a transaction pool has no LISTEN) is NULL, as in enqueue.sql: an
-- empty channel would make the release's pg_notify fail, and the release
-- with it.
WITH unflushed AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_at, listener, holder, kind)
SELECT $1::text, $2::text, $3::boolean, $4::integer, clock_timestamp() + $5::bigint * interval '1 millisecond',
       NULLIF($6::text, ''), $7::text, $8::char(1)
  FROM unflushed
RETURNING ticket
