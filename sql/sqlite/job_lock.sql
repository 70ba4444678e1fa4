-- One ledger row inside a write transaction (SQLite's write lock covers it):
-- ?1 job, ?2 run key.
SELECT {{job_columns}}
  FROM sqlock_job_runs r
 WHERE r.job = ?1 AND r.run_key = ?2
