-- Schema version 17 for PostgreSQL: nothing to change.
-- Version 17 declares the text parameters of MariaDB's grant procedures and
-- of its holders' renewal utf8mb4, whatever the database's default character
-- set, and makes its permit grant lock the semaphore's row exclusively from
-- its first statement (migrations/mysql/0017_utf8mb4_and_permit_lock.sql).
-- A PostgreSQL function's text is in the database's one encoding, as its
-- tables' is, and INSERT ... ON CONFLICT DO NOTHING, which sqlock_grant_permit
-- runs before its SELECT ... FOR UPDATE, locks no existing row. The version
-- is recorded all the same, so that a schema version means the same step on
-- every backend.
-- For a custom table prefix, replace every "sqlock_" first.

INSERT INTO sqlock_schema_version (version, name) VALUES (17, 'utf8mb4_and_permit_lock') ON CONFLICT DO NOTHING;
