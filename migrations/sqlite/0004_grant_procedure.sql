-- Schema version 4 for SQLite: nothing to change.
-- Version 4 moved MySQL's lease grant into a stored procedure
-- (migrations/mysql/0004_grant_procedure.sql); SQLite grants in one
-- statement already. The version is recorded all the same, so that a schema
-- version means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (4, 'grant_procedure');
