-- Writes a ledger row: ?1 job, ?2 run key, ?3 status, ?4 owner, ?5 holder,
-- ?6 token, ?7 attempts, ?8 starting (started := now and finished := NULL;
-- otherwise finished := now), ?9 retry in ms (negative: none), ?10 result,
-- ?11 last error ('' for NULL). Runs only in a fenced transaction.
INSERT INTO sqlock_job_runs AS r (job, run_key, status, owner, holder, token, attempts,
                                  started_ms, finished_ms, retry_ms, result, last_error)
VALUES (?1, ?2, ?3, ?4, NULLIF(?5, ''), ?6, ?7,
        sqlock_now_ms(),
        CASE WHEN ?8 THEN NULL ELSE sqlock_now_ms() END,
        CASE WHEN ?9 >= 0 THEN sqlock_now_ms() + ?9 END,
        NULLIF(?10, ''), NULLIF(?11, ''))
ON CONFLICT (job, run_key) DO UPDATE
   SET status = excluded.status, owner = excluded.owner, holder = excluded.holder,
       token = excluded.token, attempts = excluded.attempts,
       started_ms = CASE WHEN ?8 THEN excluded.started_ms ELSE r.started_ms END,
       finished_ms = excluded.finished_ms, retry_ms = excluded.retry_ms,
       result = excluded.result, last_error = excluded.last_error
