-- Schema version 4 for PostgreSQL: nothing to change.
-- Version 4 moved MySQL's lease grant into a stored procedure
-- (migrations/mysql/0004_grant_procedure.sql); PostgreSQL grants in one
-- statement already. The version is recorded all the same, so that a schema
-- version means the same step on every backend.

INSERT INTO sqlock_schema_version (version, name) VALUES (4, 'grant_procedure') ON CONFLICT DO NOTHING;
