-- sqlock schema version 8 for MySQL / MariaDB: a leaner grant and wake-up,
-- and a shorter window in which a request that is not fair may pass a waiter.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure bodies need the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- What changed from versions 5 and 7, and why (measured with SHOW PROFILES on
-- MariaDB 10.11; docs/benchmarks.md):
-- - A request that is not fair now yields to a waiter that is not fair either
--   once that waiter has waited 2 ms (was 20 ms): a releaser asking again at
--   once no longer re-wins the key for the first 20 ms of every wait, and
--   2 ms still covers a waiter that queued while the key was being released.
-- - The grant reads its new token back through LAST_INSERT_ID(expr) instead
--   of a second lookup of the fence row, and leaves the queue only when it
--   had a ticket.
-- - The wake-up first probes the queue's index for any waiter of the key, and
--   picks the head with SELECT ... LIMIT 1 INTO instead of MIN() over a
--   derived table, which built a temporary table on every release (the
--   costliest statement of an uncontended lock + unlock).

DROP PROCEDURE IF EXISTS sqlock_grant;
DROP PROCEDURE IF EXISTS sqlock_wake_kind;
DELIMITER //
-- Grants p_key in a lease mode: p_owner, p_mode, p_lease_ms, p_holder, p_note;
-- p_ticket and p_priority are the requester's queue position (no ticket: the
-- largest BIGINT; not fair: the smallest). Granted only when no live waiter is
-- ahead: a fair waiter of higher priority, or of the same priority with a
-- lower ticket; and, for a request that is not fair, also a waiter that is not
-- fair either, has a lower ticket and has waited 2 ms or more (a releaser
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
    -- No waiter with a doorbell: nothing to do (v_listener stays NULL).
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    -- The queue order mixes directions, so picking the head sorts: first an
    -- index probe, which is all an uncontended release pays.
    IF EXISTS (SELECT 1 FROM sqlock_waiters WHERE lock_key = p_key) THEN
        SELECT listener INTO v_listener FROM sqlock_waiters
         WHERE lock_key = p_key AND listener IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
           AND (p_permits IS NULL OR (kind = 'P') = p_permits)
         ORDER BY fair DESC, priority DESC, ticket LIMIT 1;
    END IF;
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
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (8, 'leaner_grant');
