-- Renewal: $1 key, $2 owner, $3 lease ms. An expired lease cannot be revived,
-- even if nobody has taken the key over yet.
UPDATE sqlock_locks SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
 WHERE lock_key = $1 AND owner = $2 AND expires_at > clock_timestamp()
