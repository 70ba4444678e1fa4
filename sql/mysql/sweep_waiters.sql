-- Deletes up to ? dead waiter rows (their client stopped heartbeating).
DELETE FROM sqlock_waiters WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT ?
