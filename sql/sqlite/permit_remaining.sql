-- ?1 name: ms until the first live permit expires (NULL when none is live).
SELECT max(0, min(expires_ms) - sqlock_now_ms()) FROM sqlock_holders
 WHERE kind = 'P' AND lock_key = ?1 AND expires_ms > sqlock_now_ms()
