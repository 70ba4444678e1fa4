-- sqlock schema version 11 for MySQL / MariaDB: a select_for_update release
-- in one round trip.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure body needs the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- A select_for_update holder released its key with ROLLBACK, then rang the
-- next waiter's doorbell with CALL sqlock_wake: two round trips, one more
-- statement than the same lock held with raw SQL (docs/benchmarks.md). Both
-- now happen in one CALL, in that order, so the lookup of the queue's head
-- follows the rollback at once. (Rung before the rollback, a waiter that is
-- itself a select_for_update request would find the row still locked -- it
-- takes no lock wait -- and sleep out its backoff; rung after, a waiter
-- blocked on the row may be granted before the lookup, which then rings the
-- next one for one needless attempt.)

DROP PROCEDURE IF EXISTS sqlock_release_row_lock;
DELIMITER //
-- Ends the caller's transaction, which holds p_key's row (ROLLBACK: the
-- held transaction wrote nothing that must last; the token was drawn on
-- another connection), then wakes the head of p_key's queue. The wake-up is
-- only a hint: an error there is swallowed, so an error from this CALL means
-- the rollback did not happen (the server then ends the transaction with the
-- connection). Returns no rows.
CREATE PROCEDURE sqlock_release_row_lock(IN p_key VARBINARY(255))
    MODIFIES SQL DATA
BEGIN
    ROLLBACK;
    BEGIN
        DECLARE CONTINUE HANDLER FOR SQLEXCEPTION BEGIN END;
        CALL sqlock_wake_kind(p_key, NULL);
    END;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (11, 'row_lock_release');
