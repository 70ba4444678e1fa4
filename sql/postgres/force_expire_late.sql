-- Break-glass release, second statement (same transaction, after
-- force_release.sql): $1 key. Ends what committed while the first statement
-- waited for the fence row, which its snapshot, taken before, did not see:
-- the lease of a grant that was in flight (it had taken the key's row and
-- was waiting for the fence row too, e.g. behind the old holder's fenced
-- transaction; it bumped the counter first and kept a live lease that every
-- fence then refused, blocking the key for as long as its holder renewed it),
-- and the rows of readers that joined the group meanwhile, which would
-- otherwise renew and raise the key's row again. A statement of its own for a
-- fresh snapshot. A grant that takes the key's row after this snapshot (it
-- was free or expired) is not waited for: it waits for our fence row, and its
-- token comes after ours.
WITH expired AS (
    UPDATE sqlock_locks SET expires_at = clock_timestamp() - interval '1 millisecond'
     WHERE lock_key = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()
    RETURNING 1
)
UPDATE sqlock_holders SET expires_at = clock_timestamp() - interval '1 millisecond'
 WHERE kind = 'S' AND lock_key = $1 AND expires_at > clock_timestamp() AND (SELECT count(*) FROM expired) >= 0
