-- Deletes up to ?1 dead waiter rows (their client stopped heartbeating).
DELETE FROM sqlock_waiters
 WHERE ticket IN (SELECT ticket FROM sqlock_waiters WHERE expires_ms <= sqlock_now_ms() LIMIT ?1)
