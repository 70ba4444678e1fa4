-- sqlock waiter queue for MySQL / MariaDB (fair mode and blocking acquire).
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).

-- One row per waiting acquisition; see migrations/postgres/0002_waiters.sql.
CREATE TABLE IF NOT EXISTS sqlock_waiters (
    ticket      BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    lock_key    VARBINARY(255) NOT NULL,
    owner       VARCHAR(64) NOT NULL,
    fair        BOOLEAN NOT NULL,
    priority    INT NOT NULL,
    expires_at  DATETIME(6) NOT NULL,
    listener    VARCHAR(64) NULL,
    holder      VARCHAR(255) NULL,
    enqueued_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6)),
    INDEX sqlock_waiters_queue (lock_key, fair, priority, ticket)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (2, 'waiters');
