-- Which of a renewal batch's owners hold a live lease now; run only when the
-- batch renewed fewer rows than it named. The OWNERS marker becomes "?, ?, ...".
SELECT owner FROM sqlock_locks WHERE owner IN (/*OWNERS*/) AND expires_at > UTC_TIMESTAMP(6)
