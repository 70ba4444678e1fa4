-- Ledger rows, newest first: ? exact (1: ? is a job; 0: a job-name prefix, ''
-- for every job), ? job or prefix, ? and ? the prefix again, ? limit.
SELECT r.status, r.owner, r.holder, r.token, r.attempts,
       FLOOR(UNIX_TIMESTAMP(r.started_at) * 1000),
       FLOOR(UNIX_TIMESTAMP(r.finished_at) * 1000),
       FLOOR(UNIX_TIMESTAMP(r.retry_at) * 1000),
       r.result, r.last_error,
       FLOOR(UNIX_TIMESTAMP(UTC_TIMESTAMP(6)) * 1000), r.job, r.run_key
  FROM sqlock_job_runs r
 WHERE IF(?, r.job = ?, LEFT(r.job, LENGTH(?)) = ?)
 ORDER BY r.started_at DESC, r.job, r.run_key
 LIMIT ?
