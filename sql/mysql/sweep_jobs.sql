-- Deletes up to ? ledger rows started more than ? ms ago, oldest first.
DELETE FROM sqlock_job_runs
 WHERE started_at < UTC_TIMESTAMP(6) - INTERVAL (? * 1000) MICROSECOND
 ORDER BY started_at
 LIMIT ?
