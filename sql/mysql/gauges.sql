-- Figures for the whole database in one row, by the database clock
-- (UTC_TIMESTAMP is read once per statement). Holders by mode: live leases
-- by their mode; select_for_update holders are keys whose latest grant was
-- one (row_lock_token = token) and whose row is locked now (SKIP LOCKED
-- passes over it, as in inspect_row_free). Expired rows are those the
-- sweeper deletes: unique_insert lock rows and waiter rows past their lease.
SELECT FLOOR(UNIX_TIMESTAMP(UTC_TIMESTAMP(6)) * 1000),
       l.unique_insert, l.conditional_update, s.select_for_update, l.expired,
       w.live, w.fair, w.oldest_ms, w.dead,
       j.running, j.succeeded, j.failed
  FROM (SELECT COALESCE(SUM(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) AND mode = 'unique_insert'), 0) AS unique_insert,
               COALESCE(SUM(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6) AND mode = 'conditional_update'), 0) AS conditional_update,
               COALESCE(SUM(mode = 'unique_insert' AND expires_at <= UTC_TIMESTAMP(6)), 0) AS expired
          FROM sqlock_locks) l,
       (SELECT COUNT(*) AS select_for_update
          FROM sqlock_fences f JOIN sqlock_locks k ON k.lock_key = f.lock_key
         WHERE f.row_lock_token = f.token
           AND NOT (k.owner IS NOT NULL AND k.expires_at > UTC_TIMESTAMP(6))
           AND NOT EXISTS (SELECT 1 FROM sqlock_locks r WHERE r.lock_key = f.lock_key LOCK IN SHARE MODE SKIP LOCKED)) s,
       (SELECT COALESCE(SUM(expires_at > UTC_TIMESTAMP(6)), 0) AS live,
               COALESCE(SUM(expires_at > UTC_TIMESTAMP(6) AND fair), 0) AS fair,
               COALESCE(FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN expires_at > UTC_TIMESTAMP(6) THEN enqueued_at END), UTC_TIMESTAMP(6)) / 1000), 0) AS oldest_ms,
               COALESCE(SUM(expires_at <= UTC_TIMESTAMP(6)), 0) AS dead
          FROM sqlock_waiters) w,
       (SELECT COALESCE(SUM(status = 'running'), 0) AS running,
               COALESCE(SUM(status = 'succeeded'), 0) AS succeeded,
               COALESCE(SUM(status = 'failed'), 0) AS failed
          FROM sqlock_job_runs) j
