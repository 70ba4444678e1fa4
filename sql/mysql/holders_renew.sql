-- The watchdog's renewal of shared holders and permits: ? JSON array of
-- {"k", "o", "ms", "t"}. Returns the owners renewed. See
-- sqlock_renew_holders in migrations/mysql/0006_shared_and_permits.sql.
CALL sqlock_renew_holders(?)
