-- Ledger rows, newest first: $1 job, or job-name prefix when $3 is false ('' for
-- every job), $2 limit.
SELECT r.status, r.owner, r.holder, r.token, r.attempts,
       (extract(epoch FROM r.started_at) * 1000)::bigint,
       (extract(epoch FROM r.finished_at) * 1000)::bigint,
       (extract(epoch FROM r.retry_at) * 1000)::bigint,
       r.result, r.last_error,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint, r.job, r.run_key
  FROM sqlock_job_runs r
 WHERE CASE WHEN $3 THEN r.job = $1 ELSE starts_with(r.job, $1) END
 ORDER BY r.started_at DESC, r.job, r.run_key
 LIMIT $2
