-- Gives a lost attempt back (job_runner, after its fenced record found the
-- lease gone): $1 job, $2 run key, $3 owner, $4 token, $5 last error. Only
-- the running claim of that owner and token changes, so it never overwrites
-- a row claimed or recorded since; it needs no fence for the same reason.
-- Failed with a retry at its finish (a lost run: retried at once) and the
-- attempt not counted, one clock reading for both times.
UPDATE sqlock_job_runs AS r
   SET status = 'failed', attempts = greatest(r.attempts - 1, 0),
       finished_at = t.now, retry_at = t.now, last_error = NULLIF($5, '')
  FROM (SELECT clock_timestamp() AS now) AS t
 WHERE r.job = $1 AND r.run_key = $2 AND r.owner = $3 AND r.token = $4 AND r.status = 'running'
