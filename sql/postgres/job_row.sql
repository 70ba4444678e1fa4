-- One ledger row: $1 job, $2 run key. The first row always exists (a left
-- join from the clock), so the caller learns the database time either way.
SELECT r.status, r.owner, r.holder, r.token, r.attempts,
       (extract(epoch FROM r.started_at) * 1000)::bigint,
       (extract(epoch FROM r.finished_at) * 1000)::bigint,
       (extract(epoch FROM r.retry_at) * 1000)::bigint,
       r.result, r.last_error,
       (extract(epoch FROM c.now) * 1000)::bigint, r.job, r.run_key
  FROM (SELECT clock_timestamp() AS now) c
  LEFT JOIN sqlock_job_runs r ON r.job = $1 AND r.run_key = $2
