-- Bumps and returns the key's fencing counter: ? key. Runs only while the
-- caller holds the key's row lock (in the grant transaction, or as
-- select_for_update holder). MariaDB's RETURNING reports the updated value.
INSERT INTO sqlock_fences (lock_key, token) VALUES (?, 1)
ON DUPLICATE KEY UPDATE token = token + 1
RETURNING token
