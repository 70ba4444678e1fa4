-- The grant and its fence bump, as CTEs: granted (the lock row, when the key
-- is free, expired or the requester's, and no live waiter is ahead) and
-- fenced (the key's counter, bumped only for a grant). Included by grant and
-- grant_try; the parameters are theirs.
granted AS (
    INSERT INTO sqlock_locks AS l (lock_key, owner, mode, expires_at, acquired_at, holder, note)
    SELECT $1, $2, $3, clock_timestamp() + $4::bigint * interval '1 millisecond', clock_timestamp(), $5, $6
     WHERE NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                        WHERE w.lock_key = $1 AND w.kind <> 'P' AND w.expires_at > clock_timestamp()
                          AND CASE WHEN w.fair
                                   THEN w.priority > $8::bigint OR (w.priority = $8::bigint AND w.ticket < $7::bigint)
                                   ELSE $8::bigint = -9223372036854775808 AND w.ticket < $7::bigint
                                        AND w.enqueued_at <= clock_timestamp() - interval '2 milliseconds' END)
    ON CONFLICT (lock_key) DO UPDATE
       SET owner = EXCLUDED.owner, mode = EXCLUDED.mode, expires_at = EXCLUDED.expires_at,
           acquired_at = EXCLUDED.acquired_at, holder = EXCLUDED.holder, note = EXCLUDED.note
     WHERE l.owner IS NULL OR l.expires_at <= clock_timestamp() OR l.owner = EXCLUDED.owner
    RETURNING l.lock_key
), fenced AS (
    INSERT INTO sqlock_fences AS f (lock_key, token)
    SELECT lock_key, 1 FROM granted
    ON CONFLICT (lock_key) DO UPDATE SET token = f.token + 1
    RETURNING f.token
)
