-- A waiter takes a ticket: ? key, ? owner, ? fair, ? priority, ? lease ms,
-- ? listener ('' when waiters poll: stored as NULL), ? holder. MariaDB's RETURNING gives the ticket.
INSERT INTO sqlock_waiters (lock_key, owner, fair, priority, expires_at, listener, holder)
VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND, NULLIF(?, ''), ?)
RETURNING ticket
