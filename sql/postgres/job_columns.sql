-- The columns of a ledger row, in the order read_job_row (dialects/common)
-- decodes them; r is sqlock_job_runs. Included by job_row, job_lock, job_list.
r.status, r.owner, r.holder, r.token, r.attempts,
       (extract(epoch FROM r.started_at) * 1000)::bigint,
       (extract(epoch FROM r.finished_at) * 1000)::bigint,
       (extract(epoch FROM r.retry_at) * 1000)::bigint,
       r.result, r.last_error,
       (extract(epoch FROM clock_timestamp()) * 1000)::bigint, r.job, r.run_key
