-- ? key: clears the key's lean flag (migrations/mysql/0014_lean_grants.sql),
-- before a select_for_update grant locks its row.
CALL sqlock_unlean(?)
