-- Break-glass release, second step (same transaction), when force_live found
-- a lease: ? key. Ends the live lease row, so the next grant in any mode
-- admits the key and the holder's renewal fails. Before the fence bump: a
-- grant locks the lock row first, then the fence row, and so do we.
-- An hour back, not a microsecond: a holders' renewal (sqlock_renew_holders)
-- reads its clock once, then may wait for this row; a time just before ours
-- would be later than its clock, and look live to it.
UPDATE sqlock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 HOUR
 WHERE lock_key = ? AND owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
