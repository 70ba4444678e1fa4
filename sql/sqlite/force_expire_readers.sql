-- Break-glass release, third step (same transaction): ?1 key. Ends the rows
-- of a group of readers holding the key, whose renewals would otherwise
-- raise the key's row again (holders_renew.sql renews a holder only while
-- its own row is live).
UPDATE sqlock_holders SET expires_ms = sqlock_now_ms() - 1
 WHERE kind = 'S' AND lock_key = ?1 AND expires_ms > sqlock_now_ms()
