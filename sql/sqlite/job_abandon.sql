-- Gives a lost attempt back (job_runner, after its fenced record found the
-- lease gone): ?1 job, ?2 run key, ?3 owner, ?4 token, ?5 last error. Only
-- the running claim of that owner and token changes, so it never overwrites
-- a row claimed or recorded since; it needs no fence for the same reason.
-- Failed with a retry at its finish (a lost run: retried at once) and the
-- attempt not counted, one clock reading for both times.
UPDATE sqlock_job_runs
   SET status = 'failed', attempts = max(attempts - 1, 0),
       finished_ms = t.now, retry_ms = t.now, last_error = NULLIF(?5, '')
  FROM (SELECT sqlock_now_ms() AS now) AS t
 WHERE job = ?1 AND run_key = ?2 AND owner = ?3 AND token = ?4 AND status = 'running'
