-- One ledger row inside a write transaction (SQLite's write lock covers it):
-- ?1 job, ?2 run key.
SELECT r.status, r.owner, r.holder, r.token, r.attempts, r.started_ms, r.finished_ms, r.retry_ms,
       r.result, r.last_error, sqlock_now_ms(), r.job, r.run_key
  FROM sqlock_job_runs r
 WHERE r.job = ?1 AND r.run_key = ?2
