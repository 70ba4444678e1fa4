-- A shared or permit waiter takes a ticket: $1 key, $2 owner, $3 fair, $4
-- priority, $5 lease ms, $6 listener, $7 holder, $8 kind ('S' or 'P').
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_at, listener, holder, kind)
VALUES ($1, $2, $3, $4, clock_timestamp() + $5::bigint * interval '1 millisecond', $6, $7, $8)
RETURNING ticket
