-- sqlock schema version 7 for MySQL / MariaDB: shared and permit releases
-- wake the next waiter, as exclusive releases do since version 5.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure bodies need the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.

DROP PROCEDURE IF EXISTS sqlock_wake_kind;
DROP PROCEDURE IF EXISTS sqlock_wake;
DROP PROCEDURE IF EXISTS sqlock_release_shared;
DROP PROCEDURE IF EXISTS sqlock_release_permit;
DELIMITER //
-- Rings the doorbell of the client whose live waiter heads p_key's queue
-- (fair waiters first, by priority then ticket; then the others by ticket),
-- among the waiters for a permit (p_permits TRUE), for the lock (FALSE:
-- exclusive and shared waiters), or all of them (NULL). Called after a
-- release has committed. Never fails for a lost hint, and returns no rows.
CREATE PROCEDURE sqlock_wake_kind(IN p_key VARBINARY(255), IN p_permits BOOLEAN)
    READS SQL DATA
BEGIN
    DECLARE v_listener VARCHAR(64) DEFAULT NULL;
    DECLARE v_thread BIGINT UNSIGNED DEFAULT NULL;
    -- MIN over at most one row: always a row, so no NOT FOUND to handle.
    SELECT MIN(w.listener) INTO v_listener
      FROM (SELECT listener FROM sqlock_waiters
             WHERE lock_key = p_key AND listener IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
               AND (p_permits IS NULL OR (kind = 'P') = p_permits)
             ORDER BY fair DESC, priority DESC, ticket LIMIT 1) AS w;
    IF v_listener IS NOT NULL THEN
        -- Only connections of the same user show here, and only the one in
        -- its SLEEP names the channel: a reused thread id is never hit.
        SELECT MIN(ID) INTO v_thread FROM information_schema.PROCESSLIST
         WHERE COMMAND = 'Query' AND INFO LIKE 'SELECT SLEEP(%'
           AND LOCATE(CONCAT('''', v_listener, ''''), INFO) > 0;
        IF v_thread IS NOT NULL THEN
            BEGIN
                -- The statement may have just ended: the hint is lost and the
                -- waiter polls. Never an error for the caller.
                DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
                KILL QUERY v_thread;
            END;
        END IF;
    END IF;
END//

-- As in version 5: the head of p_key's whole queue (sqlock_release, and
-- sqlock after a select_for_update holder's rollback).
CREATE PROCEDURE sqlock_wake(IN p_key VARBINARY(255))
    READS SQL DATA
BEGIN
    CALL sqlock_wake_kind(p_key, NULL);
END//

-- Shared release (version 6), and now, when it freed the key (the last live
-- reader left), it wakes the head of the key's queue after the commit.
CREATE PROCEDURE sqlock_release_shared(IN p_key VARBINARY(255), IN p_owner VARCHAR(64))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_live INT DEFAULT NULL;
    DECLARE v_until DATETIME(6) DEFAULT NULL;
    DECLARE v_seen INT DEFAULT 0;
    DECLARE v_freed INT DEFAULT 0;
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
    SET v_freed = IF(v_until IS NULL, ROW_COUNT(), 0);
    COMMIT;
    IF v_freed > 0 THEN
        CALL sqlock_wake_kind(p_key, FALSE);
    END IF;
    SELECT COALESCE(v_live, 0) AS released;
END//

-- Permit release: p_name, p_owner. Gives the permit back, commits, then
-- wakes the head of the semaphore's queue. Returns one row: 1 when the
-- permit was live (a DELETE's count cannot tell a live one from an expired one).
CREATE PROCEDURE sqlock_release_permit(IN p_name VARBINARY(255), IN p_owner VARCHAR(64))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_live INT DEFAULT 0;
    DECLARE v_deleted INT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_live FROM sqlock_holders
     WHERE kind = 'P' AND lock_key = p_name AND owner = p_owner AND expires_at > UTC_TIMESTAMP(6);
    DELETE FROM sqlock_holders WHERE kind = 'P' AND lock_key = p_name AND owner = p_owner;
    SET v_deleted = ROW_COUNT();
    COMMIT;
    IF v_deleted > 0 THEN
        CALL sqlock_wake_kind(p_name, TRUE);
    END IF;
    SELECT v_live AS released;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (7, 'release_wake_ups');
