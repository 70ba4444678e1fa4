-- sqlock core schema for SQLite (3.40+).
-- Apply by hand with: sqlite3 locks.db < 0001_core.sql
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- Times are integer milliseconds since the Unix epoch by the database's clock:
-- CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER).

CREATE TABLE IF NOT EXISTS sqlock_schema_version (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_ms INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);

-- One row per key ever granted, never deleted: the fencing counter. The
-- triggers below keep it at the largest token granted; a grant computes its
-- token from it inside the same write transaction.
CREATE TABLE IF NOT EXISTS sqlock_fences (
    lock_key TEXT PRIMARY KEY,
    token    INTEGER NOT NULL
);

-- The key's current lease. SQLite has a single writer, so the grant statement
-- reads the counter and writes the lease without a race.
CREATE TABLE IF NOT EXISTS sqlock_locks (
    lock_key    TEXT PRIMARY KEY,
    owner       TEXT,
    mode        TEXT,
    token       INTEGER,
    expires_ms  INTEGER,
    acquired_ms INTEGER,
    holder      TEXT,
    note        TEXT
);

CREATE TRIGGER IF NOT EXISTS sqlock_fence_on_insert AFTER INSERT ON sqlock_locks
WHEN NEW.token IS NOT NULL
BEGIN
    INSERT INTO sqlock_fences (lock_key, token) VALUES (NEW.lock_key, NEW.token)
    ON CONFLICT (lock_key) DO UPDATE SET token = max(token, excluded.token);
END;

CREATE TRIGGER IF NOT EXISTS sqlock_fence_on_update AFTER UPDATE OF token ON sqlock_locks
WHEN NEW.token IS NOT NULL
BEGIN
    INSERT INTO sqlock_fences (lock_key, token) VALUES (NEW.lock_key, NEW.token)
    ON CONFLICT (lock_key) DO UPDATE SET token = max(token, excluded.token);
END;

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (1, 'core');
