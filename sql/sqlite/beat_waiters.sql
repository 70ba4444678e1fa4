-- The watchdog's heartbeat of waiter rows: ?1 is a JSON array of
-- {"t": ticket, "ms": lease}. An expired row is not revived.
UPDATE sqlock_waiters
   SET expires_ms = sqlock_now_ms() + b.ms
  FROM (SELECT value ->> 't' AS t, value ->> 'ms' AS ms FROM json_each(?1)) AS b
 WHERE sqlock_waiters.ticket = b.t AND sqlock_waiters.expires_ms > sqlock_now_ms()
RETURNING ticket
