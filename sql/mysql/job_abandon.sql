-- Gives a lost attempt back (job_runner, after its fenced record found the
-- lease gone): ? last error, ? job, ? run key, ? owner, ? token. Only the
-- running claim of that owner and token changes, so it never overwrites a
-- row claimed or recorded since; it needs no fence for the same reason.
-- Failed with a retry at its finish (a lost run: retried at once) and the
-- attempt not counted; UTC_TIMESTAMP(6) is one reading per statement.
UPDATE sqlock_job_runs
   SET status = 'failed', attempts = GREATEST(attempts - 1, 0),
       finished_at = UTC_TIMESTAMP(6), retry_at = UTC_TIMESTAMP(6), last_error = NULLIF(?, '')
 WHERE job = ? AND run_key = ? AND owner = ? AND token = ? AND status = 'running'
