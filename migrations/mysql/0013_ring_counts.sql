-- sqlock schema version 13 for MySQL / MariaDB: a doorbell ring is no longer
-- lost when the listener is between two SLEEPs.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure bodies need the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- Until now a ring was only a KILL QUERY of the listener's SLEEP, and MariaDB
-- drops a KILL QUERY that finds its connection idle: a ring sent while the
-- listener was between two statements was lost, and that waiter slept until
-- its next poll (up to a second). Now a ring also adds one to the listener's
-- row in sqlock_rings, in the release's own transaction (no commit of its
-- own, so no second redo flush), and the listener's statement reads its count
-- before it sleeps: SLEEP only while the count is the one it last saw. A ring
-- committed before that statement began ends it at once; one committed after
-- it began is followed by its KILL QUERY, which finds it running. The KILL
-- still comes after the commit, so the attempt it starts finds the key free.
-- The head of the queue is now picked inside the release's transaction, as on
-- PostgreSQL and SQLite.

-- One row per listener: created by the listener when it connects (so that a
-- release only ever updates a row, one row lock by primary key), touched again
-- by every ring, and deleted by the sweeper an hour after its last touch once
-- no connection holds the channel's name.
CREATE TABLE IF NOT EXISTS sqlock_rings (
    channel    VARCHAR(64) NOT NULL PRIMARY KEY,
    rung       BIGINT NOT NULL DEFAULT 0,
    touched_at DATETIME(6) NOT NULL,
    INDEX sqlock_rings_touched (touched_at)
) ENGINE=InnoDB;

DROP PROCEDURE IF EXISTS sqlock_release;
DROP PROCEDURE IF EXISTS sqlock_release_shared;
DROP PROCEDURE IF EXISTS sqlock_release_permit;
DROP PROCEDURE IF EXISTS sqlock_release_row_lock;
DROP PROCEDURE IF EXISTS sqlock_wake;
DROP PROCEDURE IF EXISTS sqlock_wake_kind;
DROP PROCEDURE IF EXISTS sqlock_bell;
DROP PROCEDURE IF EXISTS sqlock_ring;
DELIMITER //
-- Inside a release's transaction, before its COMMIT: finds the client whose
-- live waiter heads p_key's queue (fair waiters first, by priority then
-- ticket; then the others by ticket) among the waiters for a permit
-- (p_permits TRUE) or for the lock (FALSE: exclusive and shared waiters),
-- and counts a ring on its listener's row. o_listener is that listener's
-- channel (NULL when no waiter has one), for sqlock_ring after the COMMIT.
CREATE PROCEDURE sqlock_bell(IN p_key VARBINARY(255), IN p_permits BOOLEAN, OUT o_listener VARCHAR(64))
    MODIFIES SQL DATA
BEGIN
    -- No waiter with a doorbell: nothing to do (o_listener stays NULL).
    DECLARE CONTINUE HANDLER FOR NOT FOUND BEGIN END;
    SET o_listener = NULL;
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
        -- through it. A listener of an older library has no row: 0 rows.
        UPDATE sqlock_rings SET rung = rung + 1, touched_at = UTC_TIMESTAMP(6) WHERE channel = o_listener;
    END IF;
END//

-- After the release's COMMIT: interrupts the listener's SLEEP. The listener
-- may be between two statements (its next one then sees the count), or
-- gone. Never an error for the caller.
CREATE PROCEDURE sqlock_ring(IN p_listener VARCHAR(64))
    READS SQL DATA
BEGIN
    DECLARE v_thread BIGINT UNSIGNED DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
    IF p_listener IS NOT NULL THEN
        SET v_thread = IS_USED_LOCK(p_listener);
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
        CALL sqlock_bell(p_key, FALSE, v_listener);
    END IF;
    COMMIT;
    CALL sqlock_ring(v_listener);
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
        CALL sqlock_bell(p_key, FALSE, v_listener);
    END IF;
    COMMIT;
    CALL sqlock_ring(v_listener);
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
        CALL sqlock_bell(p_name, TRUE, v_listener);
    END IF;
    COMMIT;
    CALL sqlock_ring(v_listener);
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
    ROLLBACK;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION ROLLBACK;
        START TRANSACTION;
        CALL sqlock_bell(p_key, FALSE, v_listener);
        COMMIT;
    END;
    CALL sqlock_ring(v_listener);
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (13, 'ring_counts');
