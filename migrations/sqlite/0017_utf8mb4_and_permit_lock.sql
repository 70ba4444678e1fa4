-- Schema version 17 for SQLite: nothing to change.
-- Version 17 declares the text parameters of MariaDB's grant procedures and
-- of its holders' renewal utf8mb4, whatever the database's default character
-- set, and makes its permit grant lock the semaphore's row exclusively from
-- its first statement (migrations/mysql/0017_utf8mb4_and_permit_lock.sql).
-- SQLite has no stored procedures, and a permit grant holds the database's
-- write lock throughout. The version is recorded all the same, so that a
-- schema version means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (17, 'utf8mb4_and_permit_lock');
