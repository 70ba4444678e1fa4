-- A shared or permit waiter takes a ticket: ? key, ? owner, ? fair,
-- ? priority, ? lease ms, ? listener (none: NULL, as in enqueue.sql), ? holder,
-- ? kind ('S' or 'P').
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_at, listener, holder, kind)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND, NULLIF(?, ''), ?, ?)
RETURNING ticket
