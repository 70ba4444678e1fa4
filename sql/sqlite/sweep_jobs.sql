-- Deletes up to ?2 ledger rows started more than ?1 ms ago, oldest first.
DELETE FROM sqlock_job_runs
 WHERE rowid IN (SELECT rowid FROM sqlock_job_runs
                  WHERE started_ms < sqlock_now_ms() - ?1
                  ORDER BY started_ms LIMIT ?2)
