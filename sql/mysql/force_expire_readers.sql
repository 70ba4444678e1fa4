-- Break-glass release, third step (same transaction), when force_live found
-- a lease: ? key. Ends the rows of a group of readers holding the key, whose
-- renewals would otherwise raise the key's row again (holders_renew.sql
-- renews a holder only while its own row is live). After the lock row, the
-- order a shared grant locks them in.
-- An hour back, as in force_expire.sql: a renewal that read its clock before
-- this transaction locked the key's row must see these rows expired.
UPDATE sqlock_holders SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
 WHERE kind = 'S' AND lock_key = ? AND expires_at > UTC_TIMESTAMP(6)
