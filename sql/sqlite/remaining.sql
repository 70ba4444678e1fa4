-- ?1 key: the holder's remaining lease in ms, for a waiter's backoff.
SELECT max(0, expires_ms - sqlock_now_ms())
  FROM sqlock_locks WHERE lock_key = ?1 AND owner IS NOT NULL
