-- Sets a semaphore's limit: ? name, ? permits. Holders above a lowered
-- limit keep their permits until they release or lose them.
INSERT INTO sqlock_semaphores (name, permits, token) VALUES (?, ?, 0)
ON DUPLICATE KEY UPDATE permits = VALUES(permits)
