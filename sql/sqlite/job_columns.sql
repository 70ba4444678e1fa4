-- The columns of a ledger row, in the order read_job_row (dialects/common)
-- decodes them; r is sqlock_job_runs. Included by job_row, job_lock, job_list.
r.status, r.owner, r.holder, r.token, r.attempts, r.started_ms, r.finished_ms, r.retry_ms,
       r.result, r.last_error, sqlock_now_ms(), r.job, r.run_key
