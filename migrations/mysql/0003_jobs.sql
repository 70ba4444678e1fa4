-- sqlock job ledger and fences for application writes, for MySQL / MariaDB.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The function body needs the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too. With binary logging on, creating a
-- function needs SUPER or log_bin_trust_function_creators=1.

-- One row per (job, run key): the record of a run that job_runner keeps.
-- A row is written only in a transaction that first fences the run's lease
-- (sqlock_assert_held below), so a run that lost its lease cannot record
-- anything, least of all success. Times are UTC by the server clock.
CREATE TABLE IF NOT EXISTS sqlock_job_runs (
    job         VARBINARY(100) NOT NULL,
    run_key     VARBINARY(128) NOT NULL,
    status      VARCHAR(16) NOT NULL,
    owner       VARCHAR(64) NOT NULL,
    holder      VARCHAR(255) NULL,
    token       BIGINT NOT NULL,
    attempts    INT NOT NULL,
    started_at  DATETIME(6) NOT NULL,
    finished_at DATETIME(6) NULL,
    retry_at    DATETIME(6) NULL,
    result      MEDIUMTEXT NULL,
    last_error  TEXT NULL,
    PRIMARY KEY (job, run_key),
    INDEX sqlock_job_runs_started (started_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The token of the key's latest select_for_update grant. That mode keeps no
-- lease in sqlock_locks (its row lock is the lease), so a fence recognises
-- it by this column.
ALTER TABLE sqlock_fences ADD COLUMN IF NOT EXISTS row_lock_token BIGINT NULL;

-- Fails unless the lease on p_key with fencing token p_token is held right
-- now, by database time; call it first in a transaction that writes what the
-- lease protects. It share-locks the key's fence row, and every grant bumps
-- that row, so no other owner can be granted the key until the calling
-- transaction ends: what it writes commits while the lease is still held, or
-- not at all. Signals SQLSTATE '45000' (error 1644) with a message starting
-- "sqlock:" when the lease is not held. Under REPEATABLE READ (the default),
-- call it before the transaction's first query: the lease row is read from
-- the transaction's snapshot.
DROP FUNCTION IF EXISTS sqlock_assert_held;
DELIMITER //
CREATE FUNCTION sqlock_assert_held(p_key VARBINARY(255), p_token BIGINT) RETURNS BIGINT
    NOT DETERMINISTIC READS SQL DATA
BEGIN
    DECLARE current_token BIGINT DEFAULT NULL;
    DECLARE row_lock BIGINT DEFAULT NULL;
    DECLARE live INT DEFAULT NULL;
    -- MAX() always yields one row, so a key never granted needs no handler.
    SELECT MAX(token), MAX(row_lock_token) INTO current_token, row_lock
      FROM sqlock_fences WHERE lock_key = p_key LOCK IN SHARE MODE;
    IF current_token IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: the key was never granted';
    END IF;
    IF current_token <> p_token THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: the key was granted again';
    END IF;
    IF row_lock = p_token THEN
        RETURN p_token;
    END IF;
    SELECT MAX(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)) INTO live
      FROM sqlock_locks WHERE lock_key = p_key;
    IF live IS NULL OR live = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: it expired or was released';
    END IF;
    RETURN p_token;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (3, 'jobs');
