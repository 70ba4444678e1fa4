-- Sets a semaphore's limit: ?1 name, ?2 permits. Holders above a lowered
-- limit keep their permits until they release or lose them.
INSERT INTO sqlock_semaphores (name, permits, token) VALUES (?1, ?2, 0)
ON CONFLICT (name) DO UPDATE SET permits = excluded.permits
