-- One ledger row: ?1 job, ?2 run key. The first row always exists (a left
-- join from one row), so the caller learns the database time either way.
SELECT {{job_columns}}
  FROM (SELECT 1) AS one
  LEFT JOIN sqlock_job_runs r ON r.job = ?1 AND r.run_key = ?2
