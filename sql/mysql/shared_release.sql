-- Shared release: ? key, ? owner. One row: 1 when the holder's lease was live.
-- When the last reader leaves, wakes the key's next waiter
-- (migrations/mysql/0007_release_wake_ups.sql).
CALL sqlock_release_shared(?, ?)
