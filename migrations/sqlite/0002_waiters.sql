-- sqlock waiter queue for SQLite (fair mode and blocking acquire).
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).

-- One row per waiting acquisition; see migrations/postgres/0002_waiters.sql.
-- AUTOINCREMENT: tickets are never reused, so queue order is arrival order.
CREATE TABLE IF NOT EXISTS sqlock_waiters (
    ticket      INTEGER PRIMARY KEY AUTOINCREMENT,
    lock_key    TEXT NOT NULL,
    owner       TEXT NOT NULL,
    fair        INTEGER NOT NULL,
    priority    INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    listener    TEXT,
    holder      TEXT,
    enqueued_ms INTEGER NOT NULL DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))
);

CREATE INDEX IF NOT EXISTS sqlock_waiters_queue ON sqlock_waiters (lock_key, fair, priority DESC, ticket);

INSERT OR IGNORE INTO sqlock_schema_version (version, name) VALUES (2, 'waiters');
