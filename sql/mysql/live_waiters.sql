-- Which of a heartbeat batch's tickets are still queued; run only when the
-- batch renewed fewer rows than it named. The TICKETS marker becomes "?, ?, ...".
SELECT ticket FROM sqlock_waiters WHERE ticket IN (/*TICKETS*/) AND expires_at > UTC_TIMESTAMP(6)
