-- Ledger rows, newest first: $1 job, or job-name prefix when $3 is false ('' for
-- every job), $2 limit.
SELECT {{job_columns}}
  FROM sqlock_job_runs r
 WHERE CASE WHEN $3 THEN r.job = $1 ELSE starts_with(r.job, $1) END
 ORDER BY r.started_at DESC, r.job, r.run_key
 LIMIT $2
