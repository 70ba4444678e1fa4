-- select_for_update: $1 key, $2 waiter ticket (max bigint: none), $3 priority
-- (min bigint: not fair). Runs inside the holder's transaction. NOWAIT turns
-- a held row lock into SQLSTATE 55P03 at once. The row is free when no
-- committed lease is live on it and no live fair waiter is ahead.
SELECT (owner IS NULL OR expires_at <= clock_timestamp())
       AND NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                        WHERE w.lock_key = $1 AND w.fair AND w.expires_at > clock_timestamp()
                          AND (w.priority > $3::bigint OR (w.priority = $3::bigint AND w.ticket < $2::bigint))) AS free,
       greatest(0, ceil(extract(epoch FROM (expires_at - clock_timestamp())) * 1000))::bigint AS remaining_ms
  FROM sqlock_locks WHERE lock_key = $1 FOR UPDATE OF sqlock_locks NOWAIT
