-- Writes a ledger row: $1 job, $2 run key, $3 status, $4 owner, $5 holder,
-- $6 token, $7 attempts, $8 starting (started_at := now and finished_at :=
-- NULL; otherwise finished_at := now), $9 retry in ms (negative: none),
-- $10 result, $11 last error ('' for NULL). Runs only in a fenced transaction.
INSERT INTO sqlock_job_runs AS r (job, run_key, status, owner, holder, token, attempts,
                                  started_at, finished_at, retry_at, result, last_error)
VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7,
        clock_timestamp(),
        CASE WHEN $8::boolean THEN NULL ELSE clock_timestamp() END,
        CASE WHEN $9::bigint >= 0 THEN clock_timestamp() + $9::bigint * interval '1 millisecond' END,
        NULLIF($10, ''), NULLIF($11, ''))
ON CONFLICT (job, run_key) DO UPDATE
   SET status = EXCLUDED.status, owner = EXCLUDED.owner, holder = EXCLUDED.holder,
       token = EXCLUDED.token, attempts = EXCLUDED.attempts,
       started_at = CASE WHEN $8::boolean THEN EXCLUDED.started_at ELSE r.started_at END,
       finished_at = EXCLUDED.finished_at, retry_at = EXCLUDED.retry_at,
       result = EXCLUDED.result, last_error = EXCLUDED.last_error
