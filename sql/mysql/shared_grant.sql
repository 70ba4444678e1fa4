-- Shared grant: ? key, ? owner, ? lease ms, ? holder, ? note, ? ticket,
-- ? priority. See migrations/mysql/0006_shared_and_permits.sql.
CALL sqlock_grant_shared(?, ?, ?, ?, ?, ?, ?)
