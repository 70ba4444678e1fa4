-- Whether a holder's lease is live: ? kind, ? key, ? owner.
SELECT COUNT(*) FROM sqlock_holders WHERE kind = ? AND lock_key = ? AND owner = ? AND expires_at > UTC_TIMESTAMP(6)
