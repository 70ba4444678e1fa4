-- Creates a semaphore with ?2 permits unless ?1 exists.
INSERT OR IGNORE INTO sqlock_semaphores (name, permits, token) VALUES (?1, ?2, 0)
