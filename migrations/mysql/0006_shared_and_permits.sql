-- sqlock reader-writer locks and counting semaphores for MySQL / MariaDB.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure bodies need the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too. See migrations/postgres/0006_shared_and_permits.sql
-- and docs/design.md, "Shared locks and semaphores".

-- What a waiter waits for: 'X' exclusive, 'S' shared, 'P' a permit.
ALTER TABLE sqlock_waiters ADD COLUMN IF NOT EXISTS kind CHAR(1) NOT NULL DEFAULT 'X';

-- One row per shared holder ('S') and per semaphore permit ('P').
CREATE TABLE IF NOT EXISTS sqlock_holders (
    kind        CHAR(1) NOT NULL,
    lock_key    VARBINARY(255) NOT NULL,
    owner       VARCHAR(64) NOT NULL,
    token       BIGINT NOT NULL,
    expires_at  DATETIME(6) NOT NULL,
    acquired_at DATETIME(6) NOT NULL,
    holder      VARCHAR(255) NULL,
    note        TEXT NULL,
    PRIMARY KEY (kind, lock_key, owner)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per semaphore: its limit and its fencing counter (never deleted).
CREATE TABLE IF NOT EXISTS sqlock_semaphores (
    name    VARBINARY(255) NOT NULL PRIMARY KEY,
    permits INT NOT NULL,
    token   BIGINT NOT NULL
) ENGINE = InnoDB;

DROP PROCEDURE IF EXISTS sqlock_grant_shared;
DROP PROCEDURE IF EXISTS sqlock_release_shared;
DROP PROCEDURE IF EXISTS sqlock_grant_permit;
DROP PROCEDURE IF EXISTS sqlock_renew_holders;
DELIMITER //
-- Shared grant (see the PostgreSQL function of the same name). Readers hold
-- the key's row in sqlock_locks together: owner 'shared', mode 'shared',
-- expires_at at least every live shared holder's expiry, so exclusive grants
-- and select_for_update refuse it unchanged. The UPDATE locks the row (READ
-- COMMITTED: it decides on the latest committed version) before anything
-- else is written. Returns one row: token (NULL: not granted), remaining_ms.
CREATE PROCEDURE sqlock_grant_shared(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_lease_ms BIGINT,
                                     IN p_holder VARCHAR(255), IN p_note TEXT, IN p_ticket BIGINT,
                                     IN p_priority BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_granted INT DEFAULT 0;
    DECLARE v_now DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SET v_now = UTC_TIMESTAMP(6);
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_key AND w.kind <> 'P' AND w.expires_at > v_now
                      AND ((w.fair AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket)))
                        OR (p_priority = -9223372036854775808 AND w.kind = 'X' AND w.ticket < p_ticket))) THEN
        UPDATE sqlock_locks
           SET acquired_at = IF(owner = 'shared' AND mode = 'shared' AND expires_at > v_now, acquired_at, v_now),
               expires_at = IF(owner = 'shared' AND mode = 'shared' AND expires_at > v_now,
                               GREATEST(expires_at, v_now + INTERVAL (p_lease_ms * 1000) MICROSECOND),
                               v_now + INTERVAL (p_lease_ms * 1000) MICROSECOND),
               owner = 'shared', mode = 'shared', holder = NULL, note = NULL
         WHERE lock_key = p_key
           AND (owner IS NULL OR expires_at <= v_now OR (owner = 'shared' AND mode = 'shared'));
        SET v_granted = ROW_COUNT();
        IF v_granted = 0 AND NOT EXISTS (SELECT 1 FROM sqlock_locks WHERE lock_key = p_key) THEN
            INSERT INTO sqlock_locks (lock_key, owner, mode, expires_at, acquired_at)
            VALUES (p_key, 'shared', 'shared', v_now + INTERVAL (p_lease_ms * 1000) MICROSECOND, v_now);
            SET v_granted = 1;
        END IF;
        IF v_granted > 0 THEN
            INSERT IGNORE INTO sqlock_fences (lock_key, token) VALUES (p_key, 0);
            SELECT token INTO v_token FROM sqlock_fences WHERE lock_key = p_key;
            INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_at, acquired_at, holder, note)
            VALUES ('S', p_key, p_owner, v_token, v_now + INTERVAL (p_lease_ms * 1000) MICROSECOND, v_now,
                    p_holder, p_note);
            DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
        END IF;
    END IF;
    IF v_token IS NULL THEN
        SELECT MAX(GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)))
          INTO v_remaining FROM sqlock_locks WHERE lock_key = p_key AND owner IS NOT NULL;
        ROLLBACK;
    ELSE
        COMMIT;
    END IF;
    SELECT v_token AS token, v_remaining AS remaining_ms;
END//

-- Shared release: locks the key's row first (as grants do), then lowers its
-- expiry to the latest live shared holder's, or frees it when none is left.
-- Returns one row: 1 when the holder's lease was live.
CREATE PROCEDURE sqlock_release_shared(IN p_key VARBINARY(255), IN p_owner VARCHAR(64))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_live INT DEFAULT NULL;
    DECLARE v_until DATETIME(6) DEFAULT NULL;
    DECLARE v_seen INT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_seen FROM sqlock_locks WHERE lock_key = p_key FOR UPDATE;
    SELECT MAX(expires_at > UTC_TIMESTAMP(6)) INTO v_live FROM sqlock_holders
     WHERE kind = 'S' AND lock_key = p_key AND owner = p_owner;
    DELETE FROM sqlock_holders WHERE kind = 'S' AND lock_key = p_key AND owner = p_owner;
    SELECT MAX(expires_at) INTO v_until FROM sqlock_holders
     WHERE kind = 'S' AND lock_key = p_key AND expires_at > UTC_TIMESTAMP(6);
    UPDATE sqlock_locks SET owner = IF(v_until IS NULL, NULL, owner), expires_at = v_until
     WHERE lock_key = p_key AND owner = 'shared' AND mode = 'shared';
    COMMIT;
    SELECT COALESCE(v_live, 0) AS released;
END//

-- Permit grant (see the PostgreSQL function of the same name): the
-- semaphore's row lock serialises grants of one name, and the count after it
-- reads the latest committed rows. Returns one row: token, remaining_ms.
CREATE PROCEDURE sqlock_grant_permit(IN p_name VARBINARY(255), IN p_owner VARCHAR(64), IN p_permits INT,
                                     IN p_lease_ms BIGINT, IN p_holder VARCHAR(255), IN p_note TEXT,
                                     IN p_ticket BIGINT, IN p_priority BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_permits INT DEFAULT 0;
    DECLARE v_live BIGINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    INSERT IGNORE INTO sqlock_semaphores (name, permits, token) VALUES (p_name, p_permits, 0);
    SELECT permits INTO v_permits FROM sqlock_semaphores WHERE name = p_name FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_name AND w.kind = 'P' AND w.fair AND w.expires_at > UTC_TIMESTAMP(6)
                      AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket))) THEN
        SELECT COUNT(*) INTO v_live FROM sqlock_holders
         WHERE kind = 'P' AND lock_key = p_name AND expires_at > UTC_TIMESTAMP(6);
        IF v_live < v_permits THEN
            UPDATE sqlock_semaphores SET token = token + 1 WHERE name = p_name;
            SELECT token INTO v_token FROM sqlock_semaphores WHERE name = p_name;
            INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_at, acquired_at, holder, note)
            VALUES ('P', p_name, p_owner, v_token, UTC_TIMESTAMP(6) + INTERVAL (p_lease_ms * 1000) MICROSECOND,
                    UTC_TIMESTAMP(6), p_holder, p_note);
            DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
        END IF;
    END IF;
    IF v_token IS NULL THEN
        SELECT GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), MIN(expires_at)) / 1000))
          INTO v_remaining FROM sqlock_holders
         WHERE kind = 'P' AND lock_key = p_name AND expires_at > UTC_TIMESTAMP(6);
        ROLLBACK;
    ELSE
        COMMIT;
    END IF;
    SELECT v_token AS token, v_remaining AS remaining_ms;
END//

-- The watchdog's renewal of shared holders and permits: p_batch is a JSON
-- array of {"k": key, "o": owner, "ms": lease, "t": 'S' or 'P'}. The keys'
-- rows of shared holders are locked first, in key order, as a shared release
-- does; then the holders are renewed and each key's row raised to at least
-- its holders' new expiry. Returns the owners renewed.
CREATE PROCEDURE sqlock_renew_holders(IN p_batch LONGTEXT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SET v_now = UTC_TIMESTAMP(6);
    UPDATE sqlock_locks SET expires_at = expires_at
     WHERE lock_key IN (SELECT j.k FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k',
                                                                            t CHAR(1) PATH '$.t')) AS j
                         WHERE j.t = 'S')
       AND owner = 'shared' AND mode = 'shared'
     ORDER BY lock_key;
    UPDATE sqlock_holders h
      JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k', o VARCHAR(64) PATH '$.o',
                                               ms BIGINT PATH '$.ms', t CHAR(1) PATH '$.t')) AS j
        ON h.kind = j.t AND h.lock_key = j.k AND h.owner = j.o
       SET h.expires_at = v_now + INTERVAL (j.ms * 1000) MICROSECOND
     WHERE h.expires_at > v_now
       AND (j.t = 'P' OR EXISTS (SELECT 1 FROM sqlock_locks l
                                  WHERE l.lock_key = j.k AND l.owner = 'shared' AND l.mode = 'shared'));
    UPDATE sqlock_locks l
      JOIN (SELECT lock_key, MAX(expires_at) AS until FROM sqlock_holders
             WHERE kind = 'S' AND expires_at > v_now
               AND lock_key IN (SELECT j.k FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k',
                                                                                    t CHAR(1) PATH '$.t')) AS j
                                 WHERE j.t = 'S')
             GROUP BY lock_key) AS r ON r.lock_key = l.lock_key
       SET l.expires_at = GREATEST(l.expires_at, r.until)
     WHERE l.owner = 'shared' AND l.mode = 'shared';
    COMMIT;
    SELECT h.owner FROM sqlock_holders h
      JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k', o VARCHAR(64) PATH '$.o',
                                               ms BIGINT PATH '$.ms', t CHAR(1) PATH '$.t')) AS j
        ON h.kind = j.t AND h.lock_key = j.k AND h.owner = j.o
     WHERE h.expires_at = v_now + INTERVAL (j.ms * 1000) MICROSECOND;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (6, 'shared_and_permits');
