-- Schema version 8 for PostgreSQL: nothing to change.
-- Version 8 made MySQL's grant and wake-up procedures leaner and shortened
-- the window in which a request that is not fair may pass a waiter to 2 ms
-- (migrations/mysql/0008_leaner_grant.sql); here the grant is a statement in
-- sql/postgres/grant.sql that does so already. The version is recorded all
-- the same, so that a schema version means the same step on every backend.

INSERT INTO sqlock_schema_version (version, name) VALUES (8, 'leaner_grant') ON CONFLICT DO NOTHING;
