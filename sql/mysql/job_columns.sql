-- The columns of a ledger row, in the order read_job_row (dialects/common)
-- decodes them; r is sqlock_job_runs. Included by job_row, job_lock, job_list.
-- Session time zone is UTC (session_setup.sql), so UNIX_TIMESTAMP reads
-- DATETIMEs right.
r.status, r.owner, r.holder, r.token, r.attempts,
       FLOOR(UNIX_TIMESTAMP(r.started_at) * 1000),
       FLOOR(UNIX_TIMESTAMP(r.finished_at) * 1000),
       FLOOR(UNIX_TIMESTAMP(r.retry_at) * 1000),
       r.result, r.last_error,
       FLOOR(UNIX_TIMESTAMP(UTC_TIMESTAMP(6)) * 1000), r.job, r.run_key
