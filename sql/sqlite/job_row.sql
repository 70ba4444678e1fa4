-- One ledger row: ?1 job, ?2 run key. The first row always exists (a left
-- join from the clock), so the caller learns the database time either way.
SELECT r.status, r.owner, r.holder, r.token, r.attempts, r.started_ms, r.finished_ms, r.retry_ms,
       r.result, r.last_error, c.now, r.job, r.run_key
  FROM (SELECT sqlock_now_ms() AS now) AS c
  LEFT JOIN sqlock_job_runs r ON r.job = ?1 AND r.run_key = ?2
