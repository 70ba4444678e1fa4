-- select_for_update, after the holder's rollback: ? key. Rings the doorbell
-- of the next waiter as a release does (migrations/mysql/0005_wake_ups.sql).
CALL sqlock_wake(?)
