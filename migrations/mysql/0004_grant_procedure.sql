-- sqlock lease grants as one stored procedure, for MySQL / MariaDB.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
--
-- A grant used to be a transaction driven from the client: lock the key's
-- row, decide, write, bump the fence, commit. A client stalled between those
-- statements (a pause, a slow network) kept the row locked, and with it the
-- renewals of whoever held the key. Run as one CALL, the transaction begins
-- and ends inside the server, whatever the client does meanwhile, and costs
-- one round trip instead of five.

DROP PROCEDURE IF EXISTS sqlock_grant;
DELIMITER //
-- Grants p_key in a lease mode: p_owner, p_mode, p_lease_ms, p_holder, p_note;
-- p_ticket and p_priority are the requester's queue position (no ticket: the
-- largest BIGINT; not fair: the smallest), so it is granted only when no live
-- fair waiter is ahead of it. Returns one row: the new token (NULL when the
-- key is held or a waiter is ahead) and the holder's remaining lease in ms.
-- Lock waits (a select_for_update holder has the row) and duplicate inserts
-- (two first grants of a key at once) raise 1205 / 1213 / 1062: contention.
CREATE PROCEDURE sqlock_grant(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_mode VARCHAR(32),
                              IN p_lease_ms BIGINT, IN p_holder VARCHAR(255), IN p_note TEXT,
                              IN p_ticket BIGINT, IN p_priority BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_granted INT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    IF NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                    WHERE w.lock_key = p_key AND w.fair AND w.expires_at > UTC_TIMESTAMP(6)
                      AND (w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket))) THEN
        -- The row only when it is free, expired or ours. Under READ COMMITTED
        -- an UPDATE lets go of a row its WHERE rejects at once: a live lease's
        -- row is never kept locked by a contender.
        UPDATE sqlock_locks
           SET owner = p_owner, mode = p_mode,
               expires_at = UTC_TIMESTAMP(6) + INTERVAL (p_lease_ms * 1000) MICROSECOND,
               acquired_at = UTC_TIMESTAMP(6), holder = p_holder, note = p_note
         WHERE lock_key = p_key AND (owner IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR owner = p_owner);
        SET v_granted = ROW_COUNT();
        IF v_granted = 0 AND NOT EXISTS (SELECT 1 FROM sqlock_locks WHERE lock_key = p_key) THEN
            INSERT INTO sqlock_locks (lock_key, owner, mode, expires_at, acquired_at, holder, note)
            VALUES (p_key, p_owner, p_mode, UTC_TIMESTAMP(6) + INTERVAL (p_lease_ms * 1000) MICROSECOND,
                    UTC_TIMESTAMP(6), p_holder, p_note);
            SET v_granted = 1;
        END IF;
        IF v_granted > 0 THEN
            -- The fence bump after exclusion: no token is drawn by a losing attempt.
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, 1)
                ON DUPLICATE KEY UPDATE token = token + 1;
            SELECT token INTO v_token FROM sqlock_fences WHERE lock_key = p_key;
            -- A granted waiter leaves the queue.
            DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
        END IF;
    END IF;
    IF v_token IS NULL THEN
        -- MAX(): always one row, also for a key without one.
        SELECT MAX(GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)))
          INTO v_remaining FROM sqlock_locks WHERE lock_key = p_key AND owner IS NOT NULL;
        ROLLBACK;
    ELSE
        COMMIT;
    END IF;
    SELECT v_token AS token, v_remaining AS remaining_ms;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (4, 'grant_procedure');
