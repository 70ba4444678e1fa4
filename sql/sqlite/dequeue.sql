-- A waiter leaves the queue (granted, timed out, cancelled): ?1 ticket.
DELETE FROM sqlock_waiters WHERE ticket = ?1
