-- The watchdog's heartbeat of waiter rows. The ROWS marker becomes
-- "SELECT ? AS t, ? AS ms UNION ALL SELECT ?, ? ..." (ticket, lease ms).
-- An expired row is not revived: its waiter queues again at the back.
UPDATE sqlock_waiters AS w
  JOIN (/*ROWS*/) AS b ON w.ticket = b.t
   SET w.expires_at = UTC_TIMESTAMP(6) + INTERVAL (b.ms * 1000) MICROSECOND
 WHERE w.expires_at > UTC_TIMESTAMP(6)
