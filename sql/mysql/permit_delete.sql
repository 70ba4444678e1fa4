-- Permit release, step 2: ? name, ? owner.
DELETE FROM sqlock_holders WHERE kind = 'P' AND lock_key = ? AND owner = ?
