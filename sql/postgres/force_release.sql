-- Break-glass release: $1 key. Ends the key's live lease row, if any, so the
-- next grant in any mode admits the key and the holder's renewal fails, and
-- the rows of a group of readers holding it, whose renewals would otherwise
-- raise the key's row again; then bumps the key's fencing counter, so every
-- fence of the holder fails from now on. The lock row before the others, the
-- order a grant locks them in.
-- A select_for_update holder's row lock is not waited for (its row has no
-- live lease, so the UPDATE does not touch it): that holder's next ping reads
-- the new token and rolls back by itself. No row when never granted.
WITH expired AS (
    UPDATE sqlock_locks SET expires_at = clock_timestamp() - interval '1 millisecond'
     WHERE lock_key = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()
    RETURNING 1
), readers AS (
    UPDATE sqlock_holders SET expires_at = clock_timestamp() - interval '1 millisecond'
     WHERE kind = 'S' AND lock_key = $1 AND expires_at > clock_timestamp() AND (SELECT count(*) FROM expired) >= 0
    RETURNING 1
), bumped AS (
    UPDATE sqlock_fences SET token = token + 1
     WHERE lock_key = $1 AND (SELECT count(*) FROM readers) >= 0
    RETURNING token
)
SELECT token FROM bumped
