-- Break-glass release, third step (same transaction), when force_live found
-- a lease: ? key. Ends the rows of a group of readers holding the key, whose
-- renewals would otherwise raise the key's row again (holders_renew.sql
-- renews a holder only while its own row is live). After the lock row, the
-- order a shared grant locks them in.
UPDATE sqlock_holders SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 MICROSECOND
 WHERE kind = 'S' AND lock_key = ? AND expires_at > UTC_TIMESTAMP(6)
