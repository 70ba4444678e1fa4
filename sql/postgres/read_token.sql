-- The key's fencing counter as committed: $1 key. A select_for_update
-- holder's ping: a token other than its own means an operator broke the lock.
SELECT coalesce((SELECT token FROM sqlock_fences WHERE lock_key = $1), 0)
