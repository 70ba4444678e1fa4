-- select_for_update: $1 key, $2 waiter ticket (max bigint: none), $3 priority
-- (min bigint: not fair). Runs inside the holder's transaction.
--
-- The row is locked only when it is free: no committed lease is live on it
-- and no live waiter is ahead (as in grant.sql). A lease-held row is read, never locked,
-- so that a requester stalled before its ROLLBACK (a pause, a slow network)
-- cannot keep the holder's renewals waiting. NOWAIT turns a row another
-- transaction has locked into SQLSTATE 55P03 at once.
-- Columns: the row exists, it is free and now locked by us, the holder's
-- remaining lease when it is not free, and the key's fencing counter, which
-- the fence bump must find unchanged (bump_token.sql). Read in this
-- statement's snapshot, which a bump committed while it ran makes older:
-- the bump then refuses, as contention, never the other way round.
SELECT r.lock_key IS NOT NULL AS present,
       locked.lock_key IS NOT NULL AS locked,
       greatest(0, ceil(extract(epoch FROM (r.expires_at - clock_timestamp())) * 1000))::bigint AS remaining_ms,
       coalesce((SELECT f.token FROM sqlock_fences f WHERE f.lock_key = $1), 0) AS counter
  FROM (SELECT 1) AS one
  LEFT JOIN sqlock_locks r ON r.lock_key = $1
  LEFT JOIN LATERAL (
       SELECT l.lock_key FROM sqlock_locks l
        WHERE l.lock_key = $1 AND (l.owner IS NULL OR l.expires_at <= clock_timestamp())
          AND NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                           WHERE w.lock_key = $1 AND w.kind <> 'P' AND w.expires_at > clock_timestamp()
                             AND CASE WHEN w.fair
                                      THEN w.priority > $3::bigint OR (w.priority = $3::bigint AND w.ticket < $2::bigint)
                                      ELSE $3::bigint = -9223372036854775808 AND w.ticket < $2::bigint
                                           AND w.enqueued_at <= clock_timestamp() - interval '2 milliseconds' END)
          FOR UPDATE OF l NOWAIT) AS locked ON true
