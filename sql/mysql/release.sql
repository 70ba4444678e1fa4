-- Owner-checked release: ? key, ? owner, ? 1 to delete the row (unique_insert)
-- or 0 to clear its owner (conditional_update). Wakes the next waiter: see
-- migrations/mysql/0005_wake_ups.sql.
CALL sqlock_release(?, ?, ?)
