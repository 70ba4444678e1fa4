-- Renewal: ? key, ? owner, ? lease ms. An expired lease cannot be revived:
-- see migrations/mysql/0015_lock_then_judge.sql.
CALL sqlock_renew(?, ?, ?)
