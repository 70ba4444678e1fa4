-- One ledger row, locked until the transaction ends: $1 job, $2 run key.
SELECT r.status, r.owner, r.holder, r.token, r.attempts,
       (extract(epoch FROM r.started_at) * 1000)::bigint,
       (extract(epoch FROM r.finished_at) * 1000)::bigint,
       (extract(epoch FROM r.retry_at) * 1000)::bigint,
       r.result, r.last_error,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint, r.job, r.run_key
  FROM sqlock_job_runs r
 WHERE r.job = $1 AND r.run_key = $2
   FOR UPDATE
