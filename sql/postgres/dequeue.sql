-- A waiter that timed out, was cancelled or failed leaves the queue: $1 ticket.
DELETE FROM sqlock_waiters WHERE ticket = $1
