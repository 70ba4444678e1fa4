-- One ledger row, locked until the transaction ends: ? job, ? run key.
SELECT {{job_columns}}
  FROM sqlock_job_runs r
 WHERE r.job = ? AND r.run_key = ?
   FOR UPDATE
