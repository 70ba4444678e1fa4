-- Permit grant: ? name, ? owner, ? permits (when new), ? lease ms, ? holder,
-- ? note, ? ticket, ? priority. See migrations/mysql/0006_shared_and_permits.sql.
CALL sqlock_grant_permit(?, ?, ?, ?, ?, ?, ?, ?)
