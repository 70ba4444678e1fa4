-- Renewal: ? lease ms, ? key, ? owner. An expired lease cannot be revived.
UPDATE sqlock_locks SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND
 WHERE lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
