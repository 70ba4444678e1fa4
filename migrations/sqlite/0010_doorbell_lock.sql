-- Schema version 10 for SQLite: nothing to change.
-- Version 10 changed how MySQL's release finds the waiting client to wake
-- (a named lock instead of the process list; migrations/mysql/0010_doorbell_lock.sql);
-- here a release wakes that client through its datagram socket. The version
-- is recorded all the same, so that a schema version means the same step on
-- every backend.

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (10, 'doorbell_lock');
