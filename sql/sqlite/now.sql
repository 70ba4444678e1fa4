-- The database clock in milliseconds since the Unix epoch.
SELECT sqlock_now_ms()
