-- sqlock core schema for MySQL / MariaDB (InnoDB).
-- Apply by hand with: mysql DB < 0001_core.sql
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- Keys are VARBINARY so that they compare byte for byte: no collation folds
-- case, accents or trailing spaces into one key.

CREATE TABLE IF NOT EXISTS sqlock_schema_version (
    version    INT NOT NULL PRIMARY KEY,
    name       VARCHAR(100) NOT NULL,
    applied_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))
) ENGINE = InnoDB;

-- One row per key ever granted, never deleted: the fencing counter, bumped
-- only inside the transaction that establishes exclusion on the key's row.
CREATE TABLE IF NOT EXISTS sqlock_fences (
    lock_key VARBINARY(255) NOT NULL PRIMARY KEY,
    token    BIGINT NOT NULL
) ENGINE = InnoDB;

-- The key's current lease; times are UTC by the server clock.
CREATE TABLE IF NOT EXISTS sqlock_locks (
    lock_key    VARBINARY(255) NOT NULL PRIMARY KEY,
    owner       VARCHAR(64) NULL,
    mode        VARCHAR(32) NULL,
    expires_at  DATETIME(6) NULL,
    acquired_at DATETIME(6) NULL,
    holder      VARCHAR(255) NULL,
    note        TEXT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (1, 'core');
