-- sqlock schema version 14 for MySQL / MariaDB: a grant and a release of one
-- statement each on the lock row alone, while nobody waits for the key.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure and trigger bodies need the mysql client's DELIMITER lines;
-- sqlock's own migrate() understands them too.
--
-- Until now every conditional_update grant was a CALL that read the waiter
-- table, wrote the lock row and bumped the fence row, and every release a
-- CALL too. On MariaDB each table a statement touches costs 50-100 us and a
-- CALL runs every statement inside it, so one lock + unlock cost about twice
-- two plain one-row UPDATEs (docs/benchmarks.md). Now the lock row carries
-- what the grant needs:
--
--   token  the key's fencing counter while `lean` is set (the fence row's
--          token may then be behind it);
--   lean   set by a conditional_update grant that found no live waiter of
--          the lock, cleared by every waiter that finds the key busy, by a
--          select_for_update grant before it locks the row, by readers, and
--          by a forced release. While it is clear the fence row's token is
--          the counter (never less than the lock row's).
--
-- While lean is set, the library grants with one UPDATE of the lock row that
-- also bumps its token (sql/mysql/grant_lean.sql, only when it knows the
-- token it expects: compare and set, so the token it reports is the one it
-- wrote), and releases with one UPDATE that matches only while lean is still
-- set (release_lean.sql: nobody queued since, so nobody to ring). Otherwise it
-- calls the procedures below, which keep both counters right: a grant draws
-- GREATEST(fence token, lock row token) + 1.
--
-- Version 14 also reads the clock of a reader's grant and of the holders'
-- renewal after their wait for the key's row, not before (see each).
--
-- Every process that uses the database must run a library of version 14 or
-- later: an older library's select_for_update grant would draw its token
-- from the fence row alone. The triggers below refuse such a grant (error
-- 1644, "sqlock: ..."), and an older library's waiters can be passed by a
-- lean grant until their next attempt (fairness only; tokens and exclusion
-- are unaffected).

ALTER TABLE sqlock_locks
    ADD COLUMN IF NOT EXISTS token BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS lean BOOLEAN NOT NULL DEFAULT FALSE;

-- Counts select_for_update grants: the triggers tell this version's bump,
-- which adds one, from an older library's, which does not know the column.
ALTER TABLE sqlock_fences ADD COLUMN IF NOT EXISTS row_lock_grants BIGINT NOT NULL DEFAULT 0;

DROP TRIGGER IF EXISTS sqlock_locks_fold_lean;
DROP TRIGGER IF EXISTS sqlock_fences_row_lock_insert;
DROP TRIGGER IF EXISTS sqlock_fences_row_lock_update;
DELIMITER //
-- A lean row's counter is the key's: deleting the row (a DBA, a tool; sqlock
-- itself deletes only unique_insert rows, which are never lean) folds it
-- into the fence row first, which nothing deletes. TRUNCATE fires no
-- trigger: empty the lock table with DELETE.
CREATE TRIGGER sqlock_locks_fold_lean BEFORE DELETE ON sqlock_locks FOR EACH ROW
BEGIN
    IF OLD.lean THEN
        INSERT INTO sqlock_fences (lock_key, token) VALUES (OLD.lock_key, OLD.token)
            ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token));
    END IF;
END//

CREATE TRIGGER sqlock_fences_row_lock_insert BEFORE INSERT ON sqlock_fences FOR EACH ROW
BEGIN
    IF NEW.row_lock_token IS NOT NULL AND NEW.row_lock_grants = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
            'sqlock: a select_for_update grant of a library older than schema version 14; upgrade every process that uses this database';
    END IF;
END//

CREATE TRIGGER sqlock_fences_row_lock_update BEFORE UPDATE ON sqlock_fences FOR EACH ROW
BEGIN
    IF NOT (NEW.row_lock_token <=> OLD.row_lock_token) AND NEW.row_lock_grants = OLD.row_lock_grants THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT =
            'sqlock: a select_for_update grant of a library older than schema version 14; upgrade every process that uses this database';
    END IF;
END//

-- The routines this version replaces are dropped only now, after the
-- triggers, which need the TRIGGER privilege: a user without it (see
-- docs/migrations.md) stops at the first trigger with the previous version's
-- routines in place, and its clients go on working, where dropping them
-- first left those clients with no sqlock_grant.
DROP PROCEDURE IF EXISTS sqlock_unlean//
DROP PROCEDURE IF EXISTS sqlock_refused//
DROP PROCEDURE IF EXISTS sqlock_grant//
DROP PROCEDURE IF EXISTS sqlock_grant_shared//
DROP FUNCTION IF EXISTS sqlock_assert_held//
DROP PROCEDURE IF EXISTS sqlock_renew_holders//

-- Clears p_key's lean flag, folding the lock row's token into the fence row,
-- so that the next grant goes through sqlock_grant (which keeps the queue's
-- order) and its release rings the queue. Returns nothing.
--
-- The fence row is locked first: a grant that may set lean holds it until
-- its commit, so the flag read after it is that grant's outcome, and no grant
-- can set lean again before this transaction ends. A clear flag is then
-- final without touching the lock row, which a select_for_update holder may
-- keep locked for as long as it holds the key. A set flag means no such
-- holder (one clears the flag before it locks the row, through this same
-- procedure); the lock row is taken without waiting, since a grant that
-- locked it first may be waiting for the fence row held here: on a lock
-- wait everything is let go and tried again a millisecond later. A row
-- kept share-locked for over 2 s (a fenced transaction) is given up on: the
-- waiter that called this clears it at its next attempt.
CREATE PROCEDURE sqlock_unlean(IN p_key VARBINARY(255))
    MODIFIES SQL DATA
BEGIN
    DECLARE v_lean BOOLEAN DEFAULT NULL;
    DECLARE v_token BIGINT DEFAULT NULL;
    DECLARE v_busy BOOLEAN DEFAULT FALSE;
    DECLARE v_tries INT DEFAULT 0;
    DECLARE v_wait BIGINT DEFAULT @@SESSION.innodb_lock_wait_timeout;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        SET SESSION innodb_lock_wait_timeout = v_wait;
        ROLLBACK;
        RESIGNAL;
    END;
    tries: LOOP
        START TRANSACTION;
        SELECT MAX(token) INTO v_token FROM sqlock_fences WHERE lock_key = p_key FOR UPDATE;
        SELECT MAX(lean) INTO v_lean FROM sqlock_locks WHERE lock_key = p_key;
        IF v_lean IS NULL OR NOT v_lean THEN
            COMMIT;
            LEAVE tries;
        END IF;
        SET v_busy = FALSE;
        BEGIN
            -- NOWAIT is refused in a stored procedure: a lock wait of 0 instead.
            DECLARE CONTINUE HANDLER FOR 1205 SET v_busy = TRUE;
            SET SESSION innodb_lock_wait_timeout = 0;
            SELECT token INTO v_token FROM sqlock_locks WHERE lock_key = p_key FOR UPDATE;
            SET SESSION innodb_lock_wait_timeout = v_wait;
        END;
        IF NOT v_busy THEN
            UPDATE sqlock_locks SET lean = FALSE WHERE lock_key = p_key;
            INSERT INTO sqlock_fences (lock_key, token) VALUES (p_key, v_token)
                ON DUPLICATE KEY UPDATE token = GREATEST(token, VALUES(token));
            COMMIT;
            LEAVE tries;
        END IF;
        ROLLBACK;
        SET v_tries = v_tries + 1;
        IF v_tries >= 2000 THEN
            LEAVE tries;
        END IF;
        DO SLEEP(0.001);
    END LOOP;
END//

-- The end of a refused grant (sqlock_grant, sqlock_grant_shared), inside
-- its transaction: reads the holder's remaining lease for the caller's
-- backoff (NULL when the key is free or has no row), rolls the transaction
-- back, and, for a queued waiter (p_ticket not the largest BIGINT) that met
-- a lean key, clears the flag so that the holder's release rings the queue
-- and no lean grant passes the waiter. The holder may have let go meanwhile,
-- with the one-statement release, which rings nobody (the key was lean): the
-- remaining lease is then read again, 0 when free, so that the caller tries
-- again at once rather than after its backoff (or the lease it read).
CREATE PROCEDURE sqlock_refused(IN p_key VARBINARY(255), IN p_ticket BIGINT, OUT o_remaining BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_lean BOOLEAN DEFAULT NULL;
    -- MAX(): always one row, also for a key without one.
    SELECT MAX(IF(owner IS NULL, NULL,
                  GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)))),
           MAX(lean)
      INTO o_remaining, v_lean FROM sqlock_locks WHERE lock_key = p_key;
    ROLLBACK;
    IF v_lean AND p_ticket < 9223372036854775807 THEN
        CALL sqlock_unlean(p_key);
        SELECT MAX(IF(owner IS NULL OR expires_at <= UTC_TIMESTAMP(6), 0,
                      CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)))
          INTO o_remaining FROM sqlock_locks WHERE lock_key = p_key;
    END IF;
END//

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
CREATE PROCEDURE sqlock_grant(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_mode VARCHAR(32),
                              IN p_lease_ms BIGINT, IN p_holder VARCHAR(255), IN p_note TEXT,
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

-- A reader's grant (version 9's, with the lean flag cleared while readers
-- hold the key and the token drawn past the lock row's counter, and its
-- clock read once it has the key's row).
CREATE PROCEDURE sqlock_grant_shared(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_lease_ms BIGINT,
                                     IN p_holder VARCHAR(255), IN p_note TEXT, IN p_ticket BIGINT,
                                     IN p_priority BIGINT)
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

-- The watchdog's renewal of shared holders and permits (version 6's), with
-- its clock read after the keys' and semaphores' rows are locked, not
-- before: the lock may
-- take up to innodb_lock_wait_timeout, and a holder that expired during that
-- wait (and whose permit may have been granted again since) looked live to
-- the clock read before it and was renewed: more live permits than the limit,
-- or a reader raising a key a writer may already hold. p_batch is a JSON
-- array of {"k": key, "o": owner, "ms": lease, "t": 'S' or 'P'}. Returns the
-- owners renewed.
CREATE PROCEDURE sqlock_renew_holders(IN p_batch LONGTEXT)
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
      JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k', o VARCHAR(64) PATH '$.o',
                                               ms BIGINT PATH '$.ms', t CHAR(1) PATH '$.t')) AS j
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
      JOIN JSON_TABLE(p_batch, '$[*]' COLUMNS (k VARBINARY(255) PATH '$.k', o VARCHAR(64) PATH '$.o',
                                               ms BIGINT PATH '$.ms', t CHAR(1) PATH '$.t')) AS j
        ON h.kind = j.t AND h.lock_key = j.k AND h.owner = j.o
     WHERE h.expires_at = v_now + INTERVAL (j.ms * 1000) MICROSECOND;
END//

-- Fails unless the lease on p_key with fencing token p_token is held right
-- now, by database time; call it first in a transaction that writes what the
-- lease protects (version 3's contract). It share-locks what every later
-- grant of the key must write, so no other owner can be granted the key until
-- the calling transaction ends: the fence row, which every grant but a lean
-- one bumps, and, while the key is lean, the lock row, which a lean grant
-- writes (it also holds back the lease's renewal until the transaction ends:
-- keep fenced transactions short). A select_for_update holder's grant is
-- recognised from the fence row alone, without touching the row its holder
-- keeps locked. Signals SQLSTATE '45000' (error 1644) with a message starting
-- "sqlock:" when the lease is not held. Under REPEATABLE READ (the default),
-- call it before the transaction's first query.
CREATE FUNCTION sqlock_assert_held(p_key VARBINARY(255), p_token BIGINT) RETURNS BIGINT
    NOT DETERMINISTIC READS SQL DATA
BEGIN
    DECLARE v_fence BIGINT DEFAULT NULL;
    DECLARE v_row_lock BIGINT DEFAULT NULL;
    DECLARE v_lean BOOLEAN DEFAULT NULL;
    DECLARE v_row_token BIGINT DEFAULT NULL;
    DECLARE v_live INT DEFAULT NULL;
    -- Without locks first (MAX(): always one row): a token already passed
    -- fails at once, and a select_for_update grant is told apart.
    SELECT MAX(token), MAX(row_lock_token) INTO v_fence, v_row_lock FROM sqlock_fences WHERE lock_key = p_key;
    IF v_fence > p_token THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: the key was granted again';
    END IF;
    -- A select_for_update holder's row is never lean (the flag is cleared
    -- before the row is locked, and nothing sets it while the row is locked).
    -- A lean row means the row lock that drew this token was gone before its
    -- bump committed (its connection killed while the bump waited): the same
    -- number may then be a lean grant's, whose lease is judged below. Read
    -- without locking, before the fence row's share lock (a lock on the lock
    -- row after it would invert the grants' order); a grant that makes the
    -- key lean after this read bumps the fence row first, which the second
    -- read below, under the share lock, then sees.
    IF v_row_lock = p_token AND v_fence = p_token THEN
        SELECT MAX(lean) INTO v_lean FROM sqlock_locks WHERE lock_key = p_key;
        IF NOT COALESCE(v_lean, FALSE) THEN
            SELECT MAX(token), MAX(row_lock_token) INTO v_fence, v_row_lock
              FROM sqlock_fences WHERE lock_key = p_key LOCK IN SHARE MODE;
            IF v_fence = p_token AND v_row_lock = p_token THEN
                RETURN p_token;
            END IF;
            SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: the key was granted again';
        END IF;
    END IF;
    -- A lease. The lock row before the fence row, in the order grants lock
    -- them. While the key is not lean, no grant can make it lean without the
    -- fence row, locked next.
    SELECT MAX(lean) INTO v_lean FROM sqlock_locks WHERE lock_key = p_key;
    IF v_lean THEN
        SELECT MAX(lean), MAX(token), MAX(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6))
          INTO v_lean, v_row_token, v_live FROM sqlock_locks WHERE lock_key = p_key LOCK IN SHARE MODE;
    END IF;
    SELECT MAX(token) INTO v_fence FROM sqlock_fences WHERE lock_key = p_key LOCK IN SHARE MODE;
    IF NOT v_lean OR v_lean IS NULL THEN
        SELECT MAX(owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)) INTO v_live
          FROM sqlock_locks WHERE lock_key = p_key;
        SET v_row_token = NULL;
    END IF;
    IF v_fence IS NULL AND v_row_token IS NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: the key was never granted';
    END IF;
    IF GREATEST(COALESCE(v_fence, 0), COALESCE(v_row_token, 0)) <> p_token THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: the key was granted again';
    END IF;
    IF v_live IS NULL OR v_live = 0 THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'sqlock: the lease is not held: it expired or was released';
    END IF;
    RETURN p_token;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (14, 'lean_grants');
