-- Figures for the whole database in one row, all at one reading of the clock
-- (`n`). Holders by mode: live leases by their mode (SQLite has no
-- select_for_update). Expired rows are those the sweeper deletes:
-- unique_insert lock rows and waiter rows past their lease.
WITH n AS (SELECT sqlock_now_ms() AS ms)
SELECT n.ms,
       l.unique_insert, l.conditional_update, 0, l.expired,
       w.live, w.fair, w.oldest_ms, w.dead,
       j.running, j.succeeded, j.failed
  FROM n,
       (SELECT coalesce(sum(owner IS NOT NULL AND expires_ms > (SELECT ms FROM n) AND mode = 'unique_insert'), 0) AS unique_insert,
               coalesce(sum(owner IS NOT NULL AND expires_ms > (SELECT ms FROM n) AND mode = 'conditional_update'), 0) AS conditional_update,
               coalesce(sum(mode = 'unique_insert' AND expires_ms <= (SELECT ms FROM n)), 0) AS expired
          FROM sqlock_locks) l,
       (SELECT coalesce(sum(expires_ms > (SELECT ms FROM n)), 0) AS live,
               coalesce(sum(expires_ms > (SELECT ms FROM n) AND fair), 0) AS fair,
               coalesce((SELECT ms FROM n) - min(CASE WHEN expires_ms > (SELECT ms FROM n) THEN enqueued_ms END), 0) AS oldest_ms,
               coalesce(sum(expires_ms <= (SELECT ms FROM n)), 0) AS dead
          FROM sqlock_waiters) w,
       (SELECT coalesce(sum(status = 'running'), 0) AS running,
               coalesce(sum(status = 'succeeded'), 0) AS succeeded,
               coalesce(sum(status = 'failed'), 0) AS failed
          FROM sqlock_job_runs) j
