-- Break-glass release: $1 key. Bumps the key's fencing counter, so every
-- fence of the current holder fails from now on, and ends its lease row if it
-- has a live one, so the next grant in any mode admits the key. A
-- select_for_update holder's row lock is not touched (this would wait for
-- it): that holder's next ping reads the new token and rolls back by itself.
-- No row when the key was never granted.
WITH bumped AS (
    UPDATE sqlock_fences SET token = token + 1 WHERE lock_key = $1 RETURNING token
), expired AS (
    UPDATE sqlock_locks SET expires_at = clock_timestamp() - interval '1 millisecond'
     WHERE lock_key = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()
       AND EXISTS (SELECT 1 FROM bumped)
)
SELECT token FROM bumped
