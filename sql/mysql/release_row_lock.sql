-- select_for_update release: ? key. Rings the next waiter's doorbell and
-- rolls back the transaction that holds the key's row, in one round trip
-- (migrations/mysql/0011_row_lock_release.sql).
CALL sqlock_release_row_lock(?)
