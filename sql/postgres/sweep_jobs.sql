-- Deletes up to $2 ledger rows started more than $1 ms ago. SKIP LOCKED lets
-- sweepers in every process run at once and passes over rows being written.
DELETE FROM sqlock_job_runs
 WHERE (job, run_key) IN (SELECT job, run_key FROM sqlock_job_runs
                           WHERE started_at < clock_timestamp() - $1::bigint * interval '1 millisecond'
                           LIMIT $2 FOR UPDATE SKIP LOCKED)
