-- Schema version 7 for PostgreSQL: nothing to change.
-- Version 7 made MySQL's shared and permit releases procedures that wake the
-- next waiter (migrations/mysql/0007_release_wake_ups.sql); here those
-- releases are statements in sql/ that do so already. The version is
-- recorded all the same, so that a schema version means the same step on
-- every backend.

INSERT INTO sqlock_schema_version (version, name) VALUES (7, 'release_wake_ups') ON CONFLICT DO NOTHING;
