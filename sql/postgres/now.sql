-- The database clock in milliseconds since the Unix epoch.
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint
