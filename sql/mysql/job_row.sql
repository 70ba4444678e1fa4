-- One ledger row: ? job, ? run key. The first row always exists (a left join
-- from one row), so the caller learns the database time either way. Session
-- time zone is UTC (session_setup.sql), so UNIX_TIMESTAMP reads DATETIMEs right.
SELECT r.status, r.owner, r.holder, r.token, r.attempts,
       FLOOR(UNIX_TIMESTAMP(r.started_at) * 1000),
       FLOOR(UNIX_TIMESTAMP(r.finished_at) * 1000),
       FLOOR(UNIX_TIMESTAMP(r.retry_at) * 1000),
       r.result, r.last_error,
       FLOOR(UNIX_TIMESTAMP(UTC_TIMESTAMP(6)) * 1000), r.job, r.run_key
  FROM (SELECT 1) AS one
  LEFT JOIN sqlock_job_runs r ON r.job = ? AND r.run_key = ?
