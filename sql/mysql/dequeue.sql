-- A waiter leaves the queue (granted, timed out, cancelled): ? ticket.
DELETE FROM sqlock_waiters WHERE ticket = ?
