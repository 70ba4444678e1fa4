-- Renewal: ?1 key, ?2 owner, ?3 lease ms. An expired lease cannot be revived.
UPDATE sqlock_locks
   SET expires_ms = sqlock_now_ms() + ?3
 WHERE lock_key = ?1 AND owner = ?2
   AND expires_ms > sqlock_now_ms()
