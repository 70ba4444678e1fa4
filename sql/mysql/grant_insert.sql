-- Lease-mode acquire, step 2 when the key has no row: ? key, ? owner, ? mode,
-- ? lease ms, ? holder, ? note. A concurrent insert of the same key fails
-- with a duplicate-key error: contention.
INSERT INTO sqlock_locks (lock_key, owner, mode, expires_at, acquired_at, holder, note)
VALUES (?, ?, ?, UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND, UTC_TIMESTAMP(6), ?, ?)
