-- Whether a holder's lease is live: $1 kind, $2 key, $3 owner.
SELECT count(*) FROM sqlock_holders
 WHERE kind = $1 AND lock_key = $2 AND owner = $3 AND expires_at > clock_timestamp()
