-- Lease-mode acquire in one statement: $1 key, $2 owner, $3 mode, $4 lease ms,
-- $5 holder, $6 note. The upsert admits only a free, expired or own row and
-- keeps the row locked until commit, so the fence bump that follows in the
-- same statement happens after exclusion is established; no token is drawn
-- (or burnt) by an attempt that loses. remaining_ms reads the holder's lease
-- from the statement's snapshot, for the caller's backoff.
WITH granted AS (
    INSERT INTO sqlock_locks AS l (lock_key, owner, mode, expires_at, acquired_at, holder, note)
    VALUES ($1, $2, $3, clock_timestamp() + $4::bigint * interval '1 millisecond', clock_timestamp(), $5, $6)
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
SELECT (SELECT token FROM fenced) AS token,
       (SELECT greatest(0, ceil(extract(epoch FROM (expires_at - clock_timestamp())) * 1000))::bigint
          FROM sqlock_locks WHERE lock_key = $1 AND owner IS NOT NULL) AS remaining_ms
