-- The watchdog's heartbeat of waiter rows. The markers become placeholders,
-- one per waiter: FIELD "?, ? ..." (ticket), MS "?, ? ..." (its lease ms, in
-- the same order) and TICKETS "?, ? ..." (ticket). An expired row is not
-- revived: its waiter queues again at the back.
UPDATE sqlock_waiters
   SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (ELT(FIELD(ticket, /*FIELD*/), /*MS*/) * 1000) MICROSECOND
 WHERE ticket IN (/*TICKETS*/) AND expires_at > UTC_TIMESTAMP(6)
