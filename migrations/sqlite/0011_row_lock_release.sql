-- Schema version 11 for SQLite: nothing to change.
-- Version 11 made MySQL's select_for_update release one round trip (the
-- rollback and the wake-up in one procedure; migrations/mysql/0011_row_lock_release.sql);
-- SQLite has no select_for_update. The version is recorded all the same, so
-- that a schema version means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (11, 'row_lock_release');
