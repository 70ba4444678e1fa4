-- Schema version 5 for SQLite: nothing to change.
-- Version 5 stopped barging past waiters (in the grant statements, which
-- live in sql/ here) and gave MySQL a release procedure that wakes the next
-- waiter (migrations/mysql/0005_wake_ups.sql). The version is recorded all
-- the same, so that a schema version means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (5, 'wake_ups');
