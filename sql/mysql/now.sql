-- The database clock in milliseconds since the Unix epoch (session time zone is UTC).
SELECT FLOOR(UNIX_TIMESTAMP(UTC_TIMESTAMP(6)) * 1000)
