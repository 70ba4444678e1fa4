-- Ledger rows, newest first: ? exact (1: ? is a job; 0: a job-name prefix, ''
-- for every job), ? job or prefix, ? and ? the prefix again, ? limit.
SELECT {{job_columns}}
  FROM sqlock_job_runs r
 WHERE IF(?, r.job = ?, LEFT(r.job, LENGTH(?)) = ?)
 ORDER BY r.started_at DESC, r.job, r.run_key
 LIMIT ?
