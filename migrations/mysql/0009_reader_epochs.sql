-- sqlock schema version 9 for MySQL / MariaDB: each group of readers gets a
-- fencing token of its own (see migrations/postgres/0009_reader_epochs.sql
-- for why: a writer whose lease had run out passed its fence while readers
-- held the key). A shared grant that starts a group of readers bumps the
-- key's counter, as an exclusive grant does; readers that join a live group
-- take its token.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure body needs the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.

DROP PROCEDURE IF EXISTS sqlock_grant_shared;
DELIMITER //
-- Shared grant, as in version 6 (migrations/mysql/0006_shared_and_permits.sql)
-- but in steps that say whether it joined a live group or started one:
-- joining updates only that group's expiry; starting takes a free or expired
-- row, or inserts the key's first (a duplicate insert raises 1062:
-- contention). Between the two another reader may have started a group (the
-- start then matches nothing): join it then. ROW_COUNT() counts matched rows
-- on sqlock's connections (CLIENT_FOUND_ROWS), so a join that leaves the
-- group's expiry as it was still counts, as in version 6. Under READ COMMITTED each
-- UPDATE decides on the latest committed version of the row, under its lock.
-- Returns one row: token (NULL: not granted), remaining_ms.
CREATE PROCEDURE sqlock_grant_shared(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_lease_ms BIGINT,
                                     IN p_holder VARCHAR(255), IN p_note TEXT, IN p_ticket BIGINT,
                                     IN p_priority BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_started INT DEFAULT NULL;
    DECLARE v_now DATETIME(6);
    DECLARE v_until DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SET v_now = UTC_TIMESTAMP(6);
    SET v_until = v_now + INTERVAL (p_lease_ms * 1000) MICROSECOND;
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_key AND w.kind <> 'P' AND w.expires_at > v_now
                      AND ((w.fair AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket)))
                        OR (p_priority = -9223372036854775808 AND w.kind = 'X' AND w.ticket < p_ticket))) THEN
        UPDATE sqlock_locks SET expires_at = GREATEST(expires_at, v_until)
         WHERE lock_key = p_key AND owner = 'shared' AND mode = 'shared' AND expires_at > v_now;
        IF ROW_COUNT() > 0 THEN
            SET v_started = 0;
        ELSE
            UPDATE sqlock_locks
               SET owner = 'shared', mode = 'shared', holder = NULL, note = NULL,
                   expires_at = v_until, acquired_at = v_now
             WHERE lock_key = p_key AND (owner IS NULL OR expires_at <= v_now);
            IF ROW_COUNT() > 0 THEN
                SET v_started = 1;
            ELSEIF NOT EXISTS (SELECT 1 FROM sqlock_locks WHERE lock_key = p_key) THEN
                INSERT INTO sqlock_locks (lock_key, owner, mode, expires_at, acquired_at)
                VALUES (p_key, 'shared', 'shared', v_until, v_now);
                SET v_started = 1;
            ELSE
                UPDATE sqlock_locks SET expires_at = GREATEST(expires_at, v_until)
                 WHERE lock_key = p_key AND owner = 'shared' AND mode = 'shared' AND expires_at > v_now;
                IF ROW_COUNT() > 0 THEN
                    SET v_started = 0;
                END IF;
            END IF;
        END IF;
        IF v_started = 1 THEN
            -- A new group of readers: a new token, after exclusion, as for a writer.
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, LAST_INSERT_ID(1))
                ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1);
            SET v_token = LAST_INSERT_ID();
        ELSEIF v_started = 0 THEN
            SELECT token INTO v_token FROM sqlock_fences WHERE lock_key = p_key;
        END IF;
        IF v_token IS NOT NULL THEN
            INSERT INTO sqlock_holders (kind, lock_key, owner, token, expires_at, acquired_at, holder, note)
            VALUES ('S', p_key, p_owner, v_token, v_until, v_now, p_holder, p_note);
            IF p_ticket < 9223372036854775807 THEN
                DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
            END IF;
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
DELIMITER ;

-- Groups of readers live at the upgrade hold the last writer's token: give
-- each such key a new one, so that the writer's fence fails from now on (the
-- readers' fences fail too until they are granted again: the safe side).
UPDATE sqlock_fences f JOIN sqlock_locks l ON l.lock_key = f.lock_key
   SET f.token = f.token + 1
 WHERE l.owner = 'shared' AND l.mode = 'shared' AND l.expires_at > UTC_TIMESTAMP(6);

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (9, 'reader_epochs');
