-- Shared grant: $1 key, $2 owner, $3 lease ms, $4 holder, $5 note, $6 waiter
-- ticket (max bigint: none), $7 priority (min bigint: not fair). One row:
-- the token (NULL when not granted) and the holder's remaining lease. See
-- sqlock_grant_shared in migrations/postgres/0006_shared_and_permits.sql.
SELECT token, remaining_ms FROM sqlock_grant_shared($1, $2, $3::bigint, $4, $5, $6::bigint, $7::bigint)
