-- One ledger row, locked until the transaction ends: $1 job, $2 run key.
SELECT {{job_columns}}
  FROM sqlock_job_runs r
 WHERE r.job = $1 AND r.run_key = $2
   FOR UPDATE
