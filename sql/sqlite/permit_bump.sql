-- After a permit grant: ?1 name. The semaphore's counter becomes the token just granted.
UPDATE sqlock_semaphores SET token = token + 1 WHERE name = ?1
