-- sqlock schema version 11 for MySQL / MariaDB: a select_for_update release
-- in one round trip.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure body needs the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- A select_for_update holder released its key with ROLLBACK, then rang the
-- next waiter's doorbell with CALL sqlock_wake: two round trips, one more
-- statement than the same lock held with raw SQL (docs/benchmarks.md). Both
-- now happen in one CALL, the doorbell first: after the rollback, a waiter
-- blocked on the row could take the key before the doorbell's lookup of the
-- queue's head, which then rang the next waiter for nothing. A waiter woken
-- a moment before the rollback waits for the row lock in the server.

DROP PROCEDURE IF EXISTS sqlock_release_row_lock;
DELIMITER //
-- Wakes the head of p_key's queue, then ends the caller's transaction, which
-- holds p_key's row (ROLLBACK: the held transaction wrote nothing that must
-- last; the token was drawn on another connection). The wake-up is only a
-- hint: an error there is swallowed, so an error from this CALL means the
-- rollback did not happen (the server then ends the transaction with the
-- connection). Returns no rows.
CREATE PROCEDURE sqlock_release_row_lock(IN p_key VARBINARY(255))
    MODIFIES SQL DATA
BEGIN
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
        CALL sqlock_wake_kind(p_key, NULL);
    END;
    ROLLBACK;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (11, 'row_lock_release');
