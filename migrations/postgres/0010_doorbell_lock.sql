-- Schema version 10 for PostgreSQL: nothing to change.
-- Version 10 changed how MySQL's release finds the waiting client to wake
-- (a named lock instead of the process list; migrations/mysql/0010_doorbell_lock.sql);
-- here a release wakes that client with NOTIFY. The version is recorded all
-- the same, so that a schema version means the same step on every backend.

INSERT INTO sqlock_schema_version (version, name) VALUES (10, 'doorbell_lock') ON CONFLICT DO NOTHING;
