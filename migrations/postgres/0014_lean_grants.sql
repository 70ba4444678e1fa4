-- Schema version 14 for PostgreSQL: nothing to change.
-- Version 14 gives MariaDB a grant and a release of one statement each on
-- the lock row alone while nobody waits for the key
-- (migrations/mysql/0014_lean_grants.sql). PostgreSQL's grant is already one
-- statement (a data-modifying WITH that returns the token). The version is
-- recorded all the same, so that a schema version means the same step on
-- every backend.

INSERT INTO sqlock_schema_version (version, name) VALUES (14, 'lean_grants') ON CONFLICT DO NOTHING;
