-- The watchdog's renewal of one lease the batch did not renew: $1 key,
-- $2 owner, $3 lease ms. Like renew.sql, but a row another transaction has
-- locked fails at once (SQLSTATE 55P03) instead of waiting: the watchdog
-- tries again shortly, and the other leases it renews are not kept waiting.
UPDATE sqlock_locks SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
 WHERE lock_key = $1 AND owner = $2 AND expires_at > clock_timestamp()
   AND lock_key IN (SELECT lock_key FROM sqlock_locks WHERE lock_key = $1 FOR UPDATE NOWAIT)
