-- grant.sql for an attempt that holds no ticket and needs no remaining
-- lease (try_acquire): the same grant and fence bump, without the DELETE of
-- a ticket it does not have and the second read of the lock row. $1 key,
-- $2 owner, $3 mode, $4 lease ms, $5 holder, $6 note, $7 max bigint (no
-- ticket), $8 its priority (min bigint: not fair).
WITH {{grant_cte}}
SELECT (SELECT token FROM fenced) AS token, NULL::bigint AS remaining_ms
