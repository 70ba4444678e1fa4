-- select_for_update release: ? key. Rolls back the transaction that holds
-- the key's row, then rings the next waiter's doorbell, in one round trip
-- (migrations/mysql/0011_row_lock_release.sql).
CALL sqlock_release_row_lock(?)
