-- sqlock schema version 17 for MySQL / MariaDB: the grant procedures and the
-- holders' renewal take their text in utf8mb4, whatever the database's
-- default character set; a permit grant locks the semaphore's row
-- exclusively from its first statement.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure bodies need the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too. CREATE OR REPLACE PROCEDURE is MariaDB
-- syntax (MySQL 8 is not supported: see the README's Limitations); it
-- replaces each procedure in one step, so a client of version 16 calling it
-- meanwhile finds the old definition or the new one, never none.
--
-- A stored routine's parameter or variable declared without CHARACTER SET
-- takes the database's default character set and collation at the time the
-- routine is created, not the tables' (utf8mb4) nor the connection's
-- (https://dev.mysql.com/doc/refman/8.0/en/charset-database.html; MariaDB's
-- own scripts met it in MDEV-15692). On a database created with CHARACTER
-- SET latin1 (the server default of many installations), p_holder and
-- p_note of sqlock_grant, sqlock_grant_shared and sqlock_grant_permit and
-- p_batch of sqlock_renew_holders were latin1: a note or holder outside
-- latin1 (an emoji, Cyrillic) failed the grant with error 1366 "Incorrect
-- string value ... for column p_note", and a batch of renewals naming such a
-- key (keys are VARBINARY, written into the JSON as UTF-8) failed every
-- time, so every shared holder and permit of the client in it was reported
-- lost.
--
-- The four procedures below are those of versions 14 (sqlock_grant,
-- sqlock_grant_shared, sqlock_renew_holders) and 6 (sqlock_grant_permit),
-- with every text parameter, and the text columns the renewal reads out of
-- its JSON and compares with the holders' columns, declared utf8mb4 with
-- the tables' collation, utf8mb4_bin. The other routines' text parameters
-- and variables carry owners (hex), wake-up channels and listener names
-- ([a-z0-9_]) and MD5 digests: ASCII, the same in every character set, so
-- they are left as they are. Keys and semaphore names are VARBINARY
-- everywhere. The bodies are unchanged but for one statement of
-- sqlock_grant_permit:
--
-- It took the semaphore's row with INSERT IGNORE, then SELECT ... FOR
-- UPDATE. On a row that exists, INSERT IGNORE takes a shared lock on the
-- duplicate, so two grants of one semaphore at once both held it shared and
-- both waited to hold it exclusively: InnoDB ended one with deadlock 1213,
-- which the library takes for contention (the grant answers "no permit"),
-- while permits were free. 8 clients asking together for one of 16 permits,
-- 100 times each, were refused 500 to 548 times of 800. The row is now
-- created or locked exclusively by one INSERT ... ON DUPLICATE KEY UPDATE
-- that changes nothing; the count of live permits still comes after that
-- lock, and the token is drawn as before. The other writers of the row take
-- it exclusively in one statement already: set_permits is an INSERT ... ON
-- DUPLICATE KEY UPDATE (sql/mysql/permit_limit.sql) and sqlock_renew_holders
-- an UPDATE. (On PostgreSQL, INSERT ... ON CONFLICT DO NOTHING locks no
-- existing row, so the FOR UPDATE after it is the first lock taken.)

DELIMITER //
-- Grants p_key in a lease mode: p_owner, p_mode, p_lease_ms, p_holder, p_note;
-- p_ticket and p_priority are the requester's queue position (no ticket: the
-- largest BIGINT; not fair: the smallest). Granted only when no live waiter
-- for the lock (not for a permit of the same name) is ahead: a fair waiter of
-- higher priority, or of the same priority with a lower ticket; and, for a
-- request that is not fair, also a waiter that is not fair either, has a
-- lower ticket and has waited 2 ms or more (a releaser cannot re-win the key
-- over waiters that were already waiting). Returns one row: the new token
-- (NULL when the key is held or a waiter is ahead), the holder's remaining
-- lease in ms, and whether the grant left the key lean (the next grant and
-- release may be the one-statement ones). A queued waiter that finds the key
-- busy clears lean, so that the holder's release rings the queue and no lean
-- grant passes it. Lock waits (a select_for_update holder has the row) and
-- duplicate inserts (two first grants of a key at once) raise 1205 / 1213 /
-- 1062: contention.
CREATE OR REPLACE PROCEDURE sqlock_grant(IN p_key VARBINARY(255),
                                         IN p_owner VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                         IN p_mode VARCHAR(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                         IN p_lease_ms BIGINT,
                                         IN p_holder VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                         IN p_note TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                         IN p_ticket BIGINT, IN p_priority BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_granted INT DEFAULT 0;
    DECLARE v_row_token BIGINT DEFAULT 0;
    DECLARE v_lean BOOLEAN DEFAULT FALSE;
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
        -- row is never kept locked by a contender. LAST_INSERT_ID(token)
        -- reads the row's counter as this statement found it.
        UPDATE sqlock_locks
           SET owner = p_owner, mode = p_mode,
               expires_at = UTC_TIMESTAMP(6) + INTERVAL (p_lease_ms * 1000) MICROSECOND,
               acquired_at = UTC_TIMESTAMP(6), holder = p_holder, note = p_note,
               lean = FALSE, token = LAST_INSERT_ID(token)
         WHERE lock_key = p_key AND (owner IS NULL OR expires_at <= UTC_TIMESTAMP(6) OR owner = p_owner);
        SET v_granted = ROW_COUNT();
        IF v_granted > 0 THEN
            SET v_row_token = LAST_INSERT_ID();
        ELSEIF NOT EXISTS (SELECT 1 FROM sqlock_locks WHERE lock_key = p_key) THEN
            INSERT INTO sqlock_locks (lock_key, owner, mode, expires_at, acquired_at, holder, note)
            VALUES (p_key, p_owner, p_mode, UTC_TIMESTAMP(6) + INTERVAL (p_lease_ms * 1000) MICROSECOND,
                    UTC_TIMESTAMP(6), p_holder, p_note);
            SET v_granted = 1;
        END IF;
        IF v_granted > 0 THEN
            -- The fence bump after exclusion: no token is drawn by a losing
            -- attempt. Past both counters: the lock row's runs ahead while
            -- the key is lean. LAST_INSERT_ID(expr) is this session's own
            -- value, so it is the token this statement wrote.
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, LAST_INSERT_ID(v_row_token + 1))
                ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token, v_row_token) + 1);
            SET v_token = LAST_INSERT_ID();
            -- A granted waiter leaves the queue.
            IF p_ticket < 9223372036854775807 THEN
                DELETE FROM sqlock_waiters WHERE ticket = p_ticket;
            END IF;
            -- Lean when nobody else waits: read after the fence bump, whose
            -- row lock a waiter's sqlock_unlean takes first, so a waiter
            -- either is seen here or clears the flag after this commit. Not
            -- for a queued waiter's grant (a handoff, where others usually
            -- wait too): the next grant that did not queue sets it.
            IF p_mode = 'conditional_update' AND p_ticket = 9223372036854775807 AND NOT EXISTS (
                   SELECT 1 FROM sqlock_waiters
                    WHERE lock_key = p_key AND kind <> 'P' AND expires_at > UTC_TIMESTAMP(6)) THEN
                UPDATE sqlock_locks SET token = v_token, lean = TRUE WHERE lock_key = p_key;
                SET v_lean = TRUE;
            END IF;
        END IF;
    END IF;
    IF v_token IS NULL THEN
        CALL sqlock_refused(p_key, p_ticket, v_remaining);
        SET v_lean = FALSE;
    ELSE
        COMMIT;
    END IF;
    SELECT v_token AS token, v_remaining AS remaining_ms, v_lean AS lean;
END//

-- A reader's grant (version 14's; version 9's, with the lean flag cleared while readers
-- hold the key and the token drawn past the lock row's counter, and its
-- clock read once it has the key's row).
CREATE OR REPLACE PROCEDURE sqlock_grant_shared(IN p_key VARBINARY(255),
                                                IN p_owner VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                                IN p_lease_ms BIGINT,
                                                IN p_holder VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                                IN p_note TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                                IN p_ticket BIGINT, IN p_priority BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_remaining BIGINT DEFAULT NULL;
    DECLARE v_started INT DEFAULT NULL;
    DECLARE v_row_token BIGINT DEFAULT 0;
    DECLARE v_now DATETIME(6);
    DECLARE v_until DATETIME(6);
    DECLARE v_seen INT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    -- The key's row first, the clock after: read before a wait for the row
    -- (a select_for_update requester that locked the expired row of a group,
    -- a grant or release of the key), the clock made a group that expired
    -- during the wait look live, and the reader joined it with its token,
    -- which the select_for_update grant had drawn.
    SELECT COUNT(*) INTO v_seen FROM sqlock_locks WHERE lock_key = p_key FOR UPDATE;
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
                   expires_at = v_until, acquired_at = v_now, lean = FALSE, token = LAST_INSERT_ID(token)
             WHERE lock_key = p_key AND (owner IS NULL OR expires_at <= v_now);
            IF ROW_COUNT() > 0 THEN
                SET v_started = 1;
                SET v_row_token = LAST_INSERT_ID();
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
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, LAST_INSERT_ID(v_row_token + 1))
                ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token, v_row_token) + 1);
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
        CALL sqlock_refused(p_key, p_ticket, v_remaining);
    ELSE
        COMMIT;
    END IF;
    SELECT v_token AS token, v_remaining AS remaining_ms;
END//

-- Permit grant (see the PostgreSQL function of the same name): the
-- semaphore's row lock serialises grants of one name, and the count after it
-- reads the latest committed rows. Returns one row: token, remaining_ms.
CREATE OR REPLACE PROCEDURE sqlock_grant_permit(IN p_name VARBINARY(255),
                                                IN p_owner VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                                IN p_permits INT, IN p_lease_ms BIGINT,
                                                IN p_holder VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
                                                IN p_note TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
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
    -- The semaphore's row, created if new, locked exclusively by the first
    -- statement: InnoDB locks the duplicate row of an INSERT ... ON DUPLICATE
    -- KEY UPDATE exclusively, and the update changes nothing. (Version 6's
    -- INSERT IGNORE share-locked it, and the FOR UPDATE then waited for two
    -- grants at once to let go of theirs: a deadlock, see the top.)
    INSERT INTO sqlock_semaphores (name, permits, token) VALUES (p_name, p_permits, 0)
        ON DUPLICATE KEY UPDATE permits = permits;
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

-- The watchdog's renewal of shared holders and permits (version 6's), with
-- its clock read after the keys' and semaphores' rows are locked, not
-- before: the lock may
-- take up to innodb_lock_wait_timeout, and a holder that expired during that
-- wait (and whose permit may have been granted again since) looked live to
-- the clock read before it and was renewed: more live permits than the limit,
-- or a reader raising a key a writer may already hold. p_batch is a JSON
-- array of {"k": key, "o": owner, "ms": lease, "t": 'S' or 'P'}. Returns the
-- owners renewed.
CREATE OR REPLACE PROCEDURE sqlock_renew_holders(IN p_batch LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_now DATETIME(6);
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    UPDATE sqlock_locks SET expires_at = expires_at
     WHERE lock_key IN (SELECT j.k FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k',
                                                                            t CHAR(1) PATH '$.t')) AS j
                         WHERE j.t = 'S')
       AND owner = 'shared' AND mode = 'shared'
     ORDER BY lock_key;
    -- And the semaphores' rows of its permits, which a permit grant locks
    -- before it counts the live permits: a grant then counts after this
    -- renewal's commit, or this renewal reads its clock after that grant's.
    UPDATE sqlock_semaphores SET permits = permits
     WHERE name IN (SELECT j.k FROM JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k',
                                                                        t CHAR(1) PATH '$.t')) AS j
                     WHERE j.t = 'P')
     ORDER BY name;
    SET v_now = UTC_TIMESTAMP(6);
    UPDATE sqlock_holders h
      JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k',
                                               o VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.o',
                                               ms BIGINT PATH '$.ms',
                                               t CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.t')) AS j
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
      JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k',
                                               o VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.o',
                                               ms BIGINT PATH '$.ms',
                                               t CHAR(1) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.t')) AS j
        ON h.kind = j.t AND h.lock_key = j.k AND h.owner = j.o
     WHERE h.expires_at = v_now + INTERVAL (j.ms * 1000) MICROSECOND;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (17, 'utf8mb4_and_permit_lock');
