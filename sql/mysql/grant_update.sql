-- Lease-mode acquire, step 2 when the locked row was free: ? owner, ? mode,
-- ? lease ms, ? holder, ? note, ? key.
UPDATE sqlock_locks
   SET owner = ?, mode = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND,
       acquired_at = UTC_TIMESTAMP(6), holder = ?, note = ?
 WHERE lock_key = ?
