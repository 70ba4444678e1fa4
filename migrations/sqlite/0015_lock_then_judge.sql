-- Schema version 15 for SQLite: nothing to change.
-- Version 15 makes the lease renewal of PostgreSQL and MariaDB, and the
-- reader grant of PostgreSQL, lock the key's row before they judge its
-- expiry (migrations/postgres/0015_lock_then_judge.sql). On SQLite a writer
-- holds the whole database, so nothing waits between a statement's clock and
-- its write. The version is recorded all the same, so that a schema version
-- means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (15, 'lock_then_judge');
