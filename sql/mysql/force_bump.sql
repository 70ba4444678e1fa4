-- Break-glass release, last step (same transaction): ? key. Bumps the key's
-- fencing counter, so every fence of the current holder fails from now on.
-- Matches nothing when the key was never granted.
UPDATE sqlock_fences SET token = token + 1 WHERE lock_key = ?
