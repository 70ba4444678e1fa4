-- The watchdog's renewal of many leases in one statement: ?1 is a JSON array
-- of {"k": key, "o": owner, "ms": lease}. Returns the owners renewed.
UPDATE sqlock_locks
   SET expires_ms = sqlock_now_ms() + b.ms
  FROM (SELECT value ->> 'k' AS k, value ->> 'o' AS o, value ->> 'ms' AS ms FROM json_each(?1)) AS b
 WHERE sqlock_locks.lock_key = b.k AND sqlock_locks.owner = b.o
   AND sqlock_locks.expires_ms > sqlock_now_ms()
RETURNING owner
