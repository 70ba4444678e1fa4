-- Deletes up to $1 dead waiter rows (their client stopped heartbeating).
DELETE FROM sqlock_waiters
 WHERE ticket IN (SELECT ticket FROM sqlock_waiters WHERE expires_at <= clock_timestamp()
                   LIMIT $1 FOR UPDATE SKIP LOCKED)
   AND expires_at <= clock_timestamp()
