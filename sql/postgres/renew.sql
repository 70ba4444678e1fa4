-- Renewal: $1 key, $2 owner, $3 lease ms. An expired lease cannot be revived,
-- even if nobody has taken the key over yet: the key's row is locked before
-- the lease is judged (migrations/postgres/0015_lock_then_judge.sql).
SELECT sqlock_renew($1, $2, $3::bigint)
