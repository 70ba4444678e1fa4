-- Schema version 13 for SQLite: nothing to change.
-- Version 13 keeps MariaDB's doorbell rings from being lost while the
-- listener is between two statements (migrations/mysql/0013_ring_counts.sql).
-- SQLite's doorbell is a datagram socket, which keeps a ring until the
-- listener reads it, so nothing was lost here. The version is recorded all
-- the same, so that a schema version means the same step on every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (13, 'ring_counts');
