-- Serialises concurrent migrate() calls for this prefix until the migration
-- transaction ends.
SELECT pg_advisory_xact_lock(hashtext('sqlock_migrate'))
