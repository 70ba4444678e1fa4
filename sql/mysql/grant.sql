-- Lease-mode acquire: ? key, ? owner, ? mode, ? lease ms, ? holder, ? note,
-- ? waiter ticket, ? priority. One round trip: see
-- migrations/mysql/0004_grant_procedure.sql.
CALL sqlock_grant(?, ?, ?, ?, ?, ?, ?, ?)
