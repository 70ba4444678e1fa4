-- The watchdog's renewal of one lease the batch did not renew: ? lease ms,
-- ? key, ? owner. Like renew.sql, but a row another transaction has locked
-- fails at once (1205) instead of waiting: the watchdog tries again shortly,
-- and the other leases it renews are not kept waiting.
SET STATEMENT innodb_lock_wait_timeout = 0 FOR
UPDATE sqlock_locks SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
 WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
