-- sqlock schema version 10 for MySQL / MariaDB: the doorbell is found through
-- a named lock instead of information_schema.PROCESSLIST.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure body needs the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- Each waiting client's listener connection now also holds GET_LOCK('<its
-- channel>', 0) for as long as it lives, so IS_USED_LOCK(channel) names the
-- thread to interrupt: a lookup in the server's lock table, where version 8
-- materialised the whole process list and matched statement texts on every
-- release that had a waiter (about 0.17 ms with one connection, more with
-- many; docs/benchmarks.md). Only that connection can hold the name, so the
-- KILL QUERY reaches nothing else; a thread id is never guessed. A listener
-- of an older library holds no such lock: the release finds no thread, and
-- that client's waiters poll as they do without a doorbell.

DROP PROCEDURE IF EXISTS sqlock_wake_kind;
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
        BEGIN
            -- The listener may be between two SLEEPs (the interrupt is then
            -- lost and its waiter polls), or gone. Never an error for the
            -- caller.
            DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
            SET v_thread = IS_USED_LOCK(v_listener);
            IF v_thread IS NOT NULL THEN
                KILL QUERY v_thread;
            END IF;
        END;
    END IF;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (10, 'doorbell_lock');
