-- Schema version 9 for SQLite: nothing to change in the tables.
-- Version 9 gives each group of readers a fencing token of its own (see
-- migrations/postgres/0009_reader_epochs.sql for why); here the shared grant
-- is a statement in sql/sqlite/shared_grant.sql that does so. The version is
-- recorded all the same, so that a schema version means the same step on
-- every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (9, 'reader_epochs');
