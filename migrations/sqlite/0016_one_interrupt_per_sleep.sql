-- Schema version 16 for SQLite: nothing to change.
-- Version 16 makes a MariaDB release interrupt a waiting client's listener
-- only if no other release has since it last slept
-- (migrations/mysql/0016_one_interrupt_per_sleep.sql). SQLite's wake-ups are
-- datagrams, of which any number can be sent. The version is recorded all
-- the same, so that a schema version means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (16, 'one_interrupt_per_sleep');
