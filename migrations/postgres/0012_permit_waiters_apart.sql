-- Schema version 12 for PostgreSQL: nothing to change in the tables.
-- Version 12 keeps a semaphore's waiters from holding back the lock of the
-- same name and from taking its wake-ups (migrations/mysql/0012_permit_waiters_apart.sql);
-- here that is in the library's own statements in sql/. The version is
-- recorded all the same, so that a schema version means the same step on
-- every backend.

INSERT INTO sqlock_schema_version (version, name) VALUES (12, 'permit_waiters_apart') ON CONFLICT DO NOTHING;
