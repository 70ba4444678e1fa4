-- sqlock schema version 16 for MySQL / MariaDB: one interrupt per sleep of
-- a wake-up listener.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure and function bodies need the mysql client's DELIMITER lines;
-- sqlock's own migrate() understands them too. Creating the function needs
-- the CREATE ROUTINE privilege (and, with binary logging on, SUPER or
-- log_bin_trust_function_creators=1), as version 14's did.
--
-- A release rings a listener with KILL QUERY of its SLEEP. Until now every
-- release that rang a listener sent one, so releases that rang the same
-- listener together (a client waiting for several keys, freed at once) sent
-- several KILLs at one SLEEP. MariaDB 10.11 then stalls: a KILL that finds
-- its target woken by an earlier KILL but not yet out of its SLEEP retries
-- for up to 2 s (THD::awake_no_mutex) while that target holds the mutex
-- every SLEEP() of the server shares, waiting for the killer. The release
-- took 2 s, and every SLEEP on the server (every other client's listener)
-- with it: 4 to 6 of 480 releases in a test of 8 releases that ring one
-- listener at once, in 60 rounds (tests/fair_test.cpp, "releases that ring
-- one listener at once interrupt its sleep once").
--
-- Now a listener that sleeps at ring count N also holds the named lock
-- sqlock_armed(channel, N), taken in a statement of its own before the one
-- that reads the count and sleeps. A release moves the count from N to N+1
-- and interrupts the holder of sqlock_armed(channel, N) only: the one release
-- that moved the count past N. The next one (N+1 to N+2) finds no holder of
-- sqlock_armed(channel, N+1) until the listener has taken its ring and armed
-- again, in a new statement. Nothing is lost: a listener that arms at N+1
-- after that release's check reads the count after it too, which the release
-- committed before its check, and returns at once.
--
-- A listener of an older library arms nothing; it holds no
-- sqlock_armed(channel, -1) either, which every listener of this version
-- holds for as long as it lives, and such a listener is interrupted at every
-- ring, as before.

DROP FUNCTION IF EXISTS sqlock_armed;
DELIMITER //
-- The named lock a listener holds while it sleeps at ring count p_seen of
-- channel p_channel (-1: held for the listener's whole life, to tell it from
-- an older library's). At most 45 characters, under the 64 of a lock name,
-- whatever the table prefix (which is in the channel).
CREATE FUNCTION sqlock_armed(p_channel VARCHAR(64), p_seen BIGINT) RETURNS VARCHAR(64)
    DETERMINISTIC NO SQL
    RETURN CONCAT('sqlock-armed:', MD5(CONCAT(p_channel, '/', p_seen)))//

-- The procedures this version replaces are dropped only after the function
-- above, which needs SUPER (or log_bin_trust_function_creators) where the
-- binary log is on: a user without it stops there with the previous
-- version's procedures in place, and its clients go on working.
DROP PROCEDURE IF EXISTS sqlock_bell//
DROP PROCEDURE IF EXISTS sqlock_ring//
DROP PROCEDURE IF EXISTS sqlock_release//
DROP PROCEDURE IF EXISTS sqlock_release_shared//
DROP PROCEDURE IF EXISTS sqlock_release_permit//
DROP PROCEDURE IF EXISTS sqlock_release_row_lock//

-- Inside a release's transaction, before its COMMIT: finds the client whose
-- live waiter heads p_key's queue (fair waiters first, by priority then
-- ticket; then the others by ticket) among the waiters for a permit
-- (p_permits TRUE) or for the lock (FALSE: exclusive and shared waiters),
-- and counts a ring on its listener's row. o_listener is that listener's
-- channel (NULL when no waiter has one) and o_seen the count this ring moved
-- past (NULL when the listener has no row), for sqlock_ring after the COMMIT.
CREATE PROCEDURE sqlock_bell(IN p_key VARBINARY(255), IN p_permits BOOLEAN, OUT o_listener VARCHAR(64),
                             OUT o_seen BIGINT)
    MODIFIES SQL DATA
BEGIN
    -- No waiter with a doorbell: nothing to do (o_listener stays NULL).
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET o_listener = NULL;
    SET o_seen = NULL;
    -- The queue order mixes directions, so picking the head sorts: first an
    -- index probe, which is all an uncontended release pays.
    IF EXISTS (SELECT 1 FROM sqlock_waiters WHERE lock_key = p_key) THEN
        SELECT listener INTO o_listener FROM sqlock_waiters
         WHERE lock_key = p_key AND listener IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
           AND (kind = 'P') = p_permits
         ORDER BY fair DESC, priority DESC, ticket LIMIT 1;
    END IF;
    IF o_listener IS NOT NULL THEN
        -- One row lock by primary key, taken last in every release: no
        -- release waits for it while holding it, so no deadlock cycle runs
        -- through it. The row lock also orders the rings of one listener:
        -- each release moves the count past a different value. A listener
        -- of an older library has no row: 0 rows.
        UPDATE sqlock_rings SET rung = LAST_INSERT_ID(rung + 1), touched_at = UTC_TIMESTAMP(6)
         WHERE channel = o_listener;
        IF ROW_COUNT() > 0 THEN
            SET o_seen = LAST_INSERT_ID() - 1;
        END IF;
    END IF;
END//

-- After the release's COMMIT: interrupts the listener's SLEEP if it sleeps
-- at the count this ring moved past (p_seen): then no other release has
-- interrupted that sleep. The listener may be between two statements (its
-- next one then sees the count), or gone. Never an error for the caller.
CREATE PROCEDURE sqlock_ring(IN p_listener VARCHAR(64), IN p_seen BIGINT)
    READS SQL DATA
BEGIN
    DECLARE v_thread BIGINT UNSIGNED DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    IF p_listener IS NOT NULL THEN
        IF p_seen IS NOT NULL THEN
            SET v_thread = IS_USED_LOCK(sqlock_armed(p_listener, p_seen));
        END IF;
        IF v_thread IS NULL AND IS_USED_LOCK(sqlock_armed(p_listener, -1)) IS NULL THEN
            -- A listener of a library older than version 16.
            SET v_thread = IS_USED_LOCK(p_listener);
        END IF;
        IF v_thread IS NOT NULL THEN
            KILL QUERY v_thread;
        END IF;
    END IF;
END//

-- Owner-checked release of a lease: deletes the row (p_delete, unique_insert)
-- or clears its owner (conditional_update); rings the lock's next waiter.
-- Returns one row: 1 when the lease was this owner's, else 0.
CREATE PROCEDURE sqlock_release(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_delete BOOLEAN)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_released INT DEFAULT 0;
    DECLARE v_listener VARCHAR(64) DEFAULT NULL;
    DECLARE v_past BIGINT DEFAULT NULL;
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
    IF v_released > 0 THEN
        CALL sqlock_bell(p_key, FALSE, v_listener, v_past);
    END IF;
    COMMIT;
    CALL sqlock_ring(v_listener, v_past);
    SELECT v_released AS released;
END//

-- A reader's release; the last live reader's frees the key and rings the
-- lock's next waiter. Returns 1 when the reader's lease was still live.
CREATE PROCEDURE sqlock_release_shared(IN p_key VARBINARY(255), IN p_owner VARCHAR(64))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_live INT DEFAULT NULL;
    DECLARE v_until DATETIME(6) DEFAULT NULL;
    DECLARE v_seen INT DEFAULT 0;
    DECLARE v_freed INT DEFAULT 0;
    DECLARE v_listener VARCHAR(64) DEFAULT NULL;
    DECLARE v_past BIGINT DEFAULT NULL;
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
    IF v_freed > 0 THEN
        CALL sqlock_bell(p_key, FALSE, v_listener, v_past);
    END IF;
    COMMIT;
    CALL sqlock_ring(v_listener, v_past);
    SELECT COALESCE(v_live, 0) AS released;
END//

-- A permit's release; rings the semaphore's next waiter. Returns 1 when the
-- permit's lease was still live.
CREATE PROCEDURE sqlock_release_permit(IN p_name VARBINARY(255), IN p_owner VARCHAR(64))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_live INT DEFAULT 0;
    DECLARE v_deleted INT DEFAULT 0;
    DECLARE v_listener VARCHAR(64) DEFAULT NULL;
    DECLARE v_past BIGINT DEFAULT NULL;
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
    IF v_deleted > 0 THEN
        CALL sqlock_bell(p_name, TRUE, v_listener, v_past);
    END IF;
    COMMIT;
    CALL sqlock_ring(v_listener, v_past);
    SELECT v_live AS released;
END//

-- The select_for_update release: rolls back the transaction that holds the
-- key's row, then rings the lock's next waiter. The ring's count needs a
-- commit of its own (the holder's transaction is rolled back, not
-- committed): only when there is a waiter to ring. Never fails once the
-- rollback is done.
CREATE PROCEDURE sqlock_release_row_lock(IN p_key VARBINARY(255))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_listener VARCHAR(64) DEFAULT NULL;
    DECLARE v_past BIGINT DEFAULT NULL;
    ROLLBACK;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION ROLLBACK;
        START TRANSACTION;
        CALL sqlock_bell(p_key, FALSE, v_listener, v_past);
        COMMIT;
    END;
    CALL sqlock_ring(v_listener, v_past);
END//

DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (16, 'one_interrupt_per_sleep');
