-- sqlock schema version 5 for MySQL / MariaDB: no barging past waiters, and
-- releases that wake the next waiter (a "doorbell").
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
--
-- Waking: each waiting client keeps one connection in
--     SELECT SLEEP(0.25), 'sqlock_w_<random>'
-- and names that channel in its waiter rows. sqlock_release frees the key
-- and then interrupts (KILL QUERY) that statement of the client whose waiter
-- heads the key's queue, which then retries at once instead of at its next
-- poll. The doorbell is only a hint: the grant decides, from the tables,
-- whoever rings. KILL QUERY needs the same database user (or the CONNECTION
-- ADMIN privilege); without it, and on Galera (where thread ids are per
-- node), the release wakes no one and waiters poll as before.

DROP PROCEDURE IF EXISTS sqlock_grant;
DELIMITER //
-- Grants p_key in a lease mode: p_owner, p_mode, p_lease_ms, p_holder, p_note;
-- p_ticket and p_priority are the requester's queue position (no ticket: the
-- largest BIGINT; not fair: the smallest). Granted only when no live waiter is
-- ahead: a fair waiter of higher priority, or of the same priority with a
-- lower ticket; and, for a request that is not fair, also a waiter that is not
-- fair either, has a lower ticket and has waited 20 ms or more (a releaser
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
                    WHERE w.lock_key = p_key AND w.expires_at > UTC_TIMESTAMP(6)
                      AND IF(w.fair, w.priority > p_priority OR (w.priority = p_priority AND w.ticket < p_ticket),
                             p_priority = -9223372036854775808 AND w.ticket < p_ticket
                             AND w.enqueued_at <= UTC_TIMESTAMP(6) - INTERVAL 20000 MICROSECOND)) THEN
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

DROP PROCEDURE IF EXISTS sqlock_wake//
-- Rings the doorbell of the client whose live waiter heads p_key's queue
-- (fair waiters first, by priority then ticket; then the others by ticket).
-- Called after a release has committed: by sqlock_release, and by sqlock
-- after a select_for_update holder's rollback. Never fails for a lost hint,
-- and returns no rows.
CREATE PROCEDURE sqlock_wake(IN p_key VARBINARY(255))
    READS SQL DATA
BEGIN
    DECLARE v_listener VARCHAR(64) DEFAULT NULL;
    DECLARE v_thread BIGINT UNSIGNED DEFAULT NULL;
    -- MIN over at most one row: always a row, so no NOT FOUND to handle.
    SELECT MIN(w.listener) INTO v_listener
      FROM (SELECT listener FROM sqlock_waiters
             WHERE lock_key = p_key AND listener IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
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

DROP PROCEDURE IF EXISTS sqlock_release//
-- Owner-checked release of p_key by p_owner: deletes the row (p_delete, for
-- unique_insert) or clears its owner, commits, then wakes the next waiter
-- (sqlock_wake). Returns one row: 1 when released. A lock wait (a
-- select_for_update holder has the row) raises 1205: the lease was not ours
-- any more.
CREATE PROCEDURE sqlock_release(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_delete BOOLEAN)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_released INT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    IF p_delete THEN
        DELETE FROM sqlock_locks WHERE lock_key = p_key AND owner = p_owner;
    ELSE
        UPDATE sqlock_locks SET owner = NULL, expires_at = NULL WHERE lock_key = p_key AND owner = p_owner;
    END IF;
    SET v_released = ROW_COUNT();
    COMMIT;
    IF v_released > 0 THEN
        CALL sqlock_wake(p_key);
    END IF;
    SELECT v_released AS released;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (5, 'wake_ups');
