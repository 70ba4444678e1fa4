-- sqlock schema version 12 for MySQL / MariaDB: a semaphore's waiters no
-- longer hold back the lock of the same name, nor take its wake-ups.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure bodies need the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- A semaphore and a lock of the same name are separate, and share only the
-- waiters table. Until now the lock's grant counted a permit waiter (kind
-- 'P') as ahead of it, so a key whose semaphore had a waiter could not be
-- locked at all for as long as that waiter kept its ticket; and a lock's
-- release could ring a permit waiter's doorbell instead of the lock's next
-- waiter. The shared grant and the permit releases already told the kinds
-- apart (versions 6 and 7).

DROP PROCEDURE IF EXISTS sqlock_grant;
DROP PROCEDURE IF EXISTS sqlock_wake;
DROP PROCEDURE IF EXISTS sqlock_release_row_lock;
DELIMITER //
-- Grants p_key in a lease mode: p_owner, p_mode, p_lease_ms, p_holder, p_note;
-- p_ticket and p_priority are the requester's queue position (no ticket: the
-- largest BIGINT; not fair: the smallest). Granted only when no live waiter
-- for the lock (not for a permit of the same name) is ahead: a fair waiter of
-- higher priority, or of the same priority with a lower ticket; and, for a
-- request that is not fair, also a waiter that is not fair either, has a
-- lower ticket and has waited 2 ms or more (a releaser
-- cannot re-win the key over waiters that were already waiting). Returns one
-- row: the new token (NULL when the key is held or a waiter is ahead) and the
-- holder's remaining lease in ms. Lock waits (a select_for_update holder has
-- the row) and duplicate inserts (two first grants of a key at once) raise
-- 1205 / 1213 / 1062: contention.
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
                    WHERE w.lock_key = p_key AND w.kind <> 'P' AND w.expires_at > UTC_TIMESTAMP(6)
                      AND IF(w.fair, w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket),
                             p_priority = -9223372036854775808 AND w.ticket < p_ticket
                             AND w.enqueued_at <= UTC_TIMESTAMP(6) - INTERVAL 2000 MICROSECOND)) THEN
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
            -- The fence bump after exclusion: no token is drawn by a losing
            -- attempt. LAST_INSERT_ID(expr) is this session's own value, so
            -- it is the token this statement wrote, whatever others do.
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, LAST_INSERT_ID(1))
                ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(token + 1);
            SET v_token = LAST_INSERT_ID();
            -- A granted waiter leaves the queue.
            IF p_ticket < 9223372036854775807 THEN
                DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
            END IF;
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

-- A lock release's wake-up (version 5): the head of the lock's waiters,
-- exclusive or shared, not a permit waiter's.
CREATE PROCEDURE sqlock_wake(IN p_key VARBINARY(255))
    READS SQL DATA
BEGIN
    CALL sqlock_wake_kind(p_key, FALSE);
END//

-- The select_for_update release (version 11), ringing the lock's next waiter.
CREATE PROCEDURE sqlock_release_row_lock(IN p_key VARBINARY(255))
    MODIFIES SQL DATA
BEGIN
    ROLLBACK;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
        CALL sqlock_wake_kind(p_key, FALSE);
    END;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (12, 'permit_waiters_apart');
