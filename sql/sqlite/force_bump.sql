-- Break-glass release, first step: ?1 key. Bumps the key's fencing counter,
-- so every fence of the current holder fails from now on; the next grant
-- draws the token after it. No row when the key was never granted.
UPDATE sqlock_fences SET token = token + 1 WHERE lock_key = ?1 RETURNING token
