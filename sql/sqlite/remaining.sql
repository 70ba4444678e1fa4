-- ?1 key: the holder's remaining lease in ms, for a waiter's backoff.
SELECT max(0, expires_ms - CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
  FROM sqlock_locks WHERE lock_key = ?1 AND owner IS NOT NULL
