-- sqlock reader-writer locks and counting semaphores for SQLite.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- See migrations/postgres/0006_shared_and_permits.sql and docs/design.md,
-- "Shared locks and semaphores". SQLite has one writer at a time: every grant
-- and release below runs in one write transaction (BEGIN IMMEDIATE), so its
-- reads and writes are one serial step.

-- What a waiter waits for: 'X' exclusive, 'S' shared, 'P' a permit.
-- SQLite has no ADD COLUMN IF NOT EXISTS: sqlock's migrate() passes over this
-- statement when the column exists (by hand, ignore its "duplicate column
-- name" error in that case).
ALTER TABLE sqlock_waiters ADD COLUMN kind TEXT NOT NULL DEFAULT 'X';

-- One row per shared holder ('S') and per semaphore permit ('P').
CREATE TABLE IF NOT EXISTS sqlock_holders (
    kind        TEXT NOT NULL,
    lock_key    TEXT NOT NULL,
    owner       TEXT NOT NULL,
    token       INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    acquired_ms INTEGER NOT NULL,
    holder      TEXT,
    note        TEXT,
    PRIMARY KEY (kind, lock_key, owner)
);

-- One row per semaphore: its limit and its fencing counter (never deleted).
CREATE TABLE IF NOT EXISTS sqlock_semaphores (
    name    TEXT PRIMARY KEY,
    permits INTEGER NOT NULL,
    token   INTEGER NOT NULL
);

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (6, 'shared_and_permits');
