-- Break-glass release, second step (same transaction): ?1 key. Ends the live
-- lease row, so the next grant admits the key and the holder's renewal fails.
UPDATE sqlock_locks SET expires_ms = sqlock_now_ms() - 1
 WHERE lock_key = ?1 AND owner IS NOT NULL AND expires_ms > sqlock_now_ms()
