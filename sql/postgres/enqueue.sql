-- A waiter takes a ticket: $1 key, $2 owner, $3 fair, $4 priority, $5 lease
-- ms (the row expires unless heartbeated), $6 listener channel ('' when the
-- client does not listen: through a transaction pool it polls, and a release
-- must not NOTIFY an empty channel name), $7 holder.
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_at, listener, holder)
VALUES ($1, $2, $3, $4, clock_timestamp() + $5::bigint * interval '1 millisecond', NULLIF($6, ''), $7)
RETURNING ticket
