-- Schema version 9 for SQLite: each group of readers gets a fencing token of
-- its own (see migrations/postgres/0009_reader_epochs.sql for why). Here the
-- shared grant is a statement of the library (sql/sqlite/shared_grant.sql),
-- so every process that uses the file must run a library of version 9 or
-- later: an older one would still start groups without a token of their own.
--
-- Groups of readers live at the upgrade hold the last writer's token (or
-- none): give each such key a new one; the trigger copies it into
-- sqlock_fences. The writer's fence fails from now on, and so do the readers'
-- until they are granted again: the safe side.
UPDATE sqlock_locks
   SET token = coalesce((SELECT f.token FROM sqlock_fences f WHERE f.lock_key = sqlock_locks.lock_key), 0) + 1
 WHERE owner = 'shared' AND mode = 'shared'
   AND expires_ms > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (9, 'reader_epochs');
