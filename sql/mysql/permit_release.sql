-- Permit release: ? name, ? owner. One row: 1 when the permit was live. Wakes
-- the semaphore's next waiter (migrations/mysql/0007_release_wake_ups.sql).
CALL sqlock_release_permit(?, ?)
