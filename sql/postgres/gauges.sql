-- Figures for the whole database in one row, all at one reading of the
-- clock (`n`, materialised once: clock_timestamp() is volatile). Holders by
-- mode: live leases by their mode; select_for_update holders are keys whose
-- latest grant was one (row_lock_token = token) and whose row is locked now
-- (FOR SHARE SKIP LOCKED passes over it, as in inspect). Expired rows are
-- those the sweeper deletes: unique_insert lock rows and waiter rows past
-- their lease.
WITH n AS (SELECT clock_timestamp() AS t)
SELECT (extract(epoch FROM n.t) * 1000)::bigint,
       l.unique_insert, l.conditional_update, s.select_for_update, l.expired,
       w.live, w.fair, w.oldest_ms, w.dead,
       j.running, j.succeeded, j.failed
  FROM n,
       LATERAL (SELECT count(*) FILTER (WHERE owner IS NOT NULL AND expires_at > n.t AND mode = 'unique_insert'),
                       count(*) FILTER (WHERE owner IS NOT NULL AND expires_at > n.t AND mode = 'conditional_update'),
                       count(*) FILTER (WHERE mode = 'unique_insert' AND expires_at <= n.t)
                  FROM sqlock_locks) l(unique_insert, conditional_update, expired),
       LATERAL (SELECT count(*)
                  FROM sqlock_fences f JOIN sqlock_locks k ON k.lock_key = f.lock_key
                 WHERE f.row_lock_token = f.token
                   AND NOT (k.owner IS NOT NULL AND k.expires_at > n.t)
                   AND NOT EXISTS (SELECT 1 FROM sqlock_locks r WHERE r.lock_key = f.lock_key
                                   FOR SHARE SKIP LOCKED)) s(select_for_update),
       LATERAL (SELECT count(*) FILTER (WHERE expires_at > n.t),
                       count(*) FILTER (WHERE expires_at > n.t AND fair),
                       coalesce(floor(extract(epoch FROM (n.t - min(enqueued_at) FILTER (WHERE expires_at > n.t))) * 1000), 0)::bigint,
                       count(*) FILTER (WHERE expires_at <= n.t)
                  FROM sqlock_waiters) w(live, fair, oldest_ms, dead),
       LATERAL (SELECT count(*) FILTER (WHERE status = 'running'),
                       count(*) FILTER (WHERE status = 'succeeded'),
                       count(*) FILTER (WHERE status = 'failed')
                  FROM sqlock_job_runs) j(running, succeeded, failed)
