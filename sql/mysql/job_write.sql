-- Writes a ledger row: ? job, ? run key, ? status, ? owner, ? holder,
-- ? token, ? attempts, ? starting (started_at := now and finished_at :=
-- NULL; otherwise finished_at := now), ? and ? retry in ms (negative: none),
-- ? result, ? last error ('' for NULL), ? starting again. Runs only in a
-- fenced transaction.
INSERT INTO sqlock_job_runs (job, run_key, status, owner, holder, token, attempts,
                             started_at, finished_at, retry_at, result, last_error)
VALUES (?, ?, ?, ?, NULLIF(?, ''), ?, ?,
        UTC_TIMESTAMP(6),
        IF(?, NULL, UTC_TIMESTAMP(6)),
        IF(? >= 0, UTC_TIMESTAMP(6) + INTERVAL (? * 1000) MICROSECOND, NULL),
        NULLIF(?, ''), NULLIF(?, ''))
ON DUPLICATE KEY UPDATE
    status = VALUES(status), owner = VALUES(owner), holder = VALUES(holder),
    token = VALUES(token), attempts = VALUES(attempts),
    started_at = IF(?, VALUES(started_at), started_at),
    finished_at = VALUES(finished_at), retry_at = VALUES(retry_at),
    result = VALUES(result), last_error = VALUES(last_error)
