-- Sets a semaphore's limit: $1 name, $2 permits. Holders above a lowered
-- limit keep their permits until they release or lose them; no new permit is
-- granted until fewer than the limit are live.
INSERT INTO sqlock_semaphores AS s (name, permits, token) VALUES ($1, $2::integer, 0)
ON CONFLICT (name) DO UPDATE SET permits = EXCLUDED.permits
