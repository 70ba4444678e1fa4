-- sqlock schema version 15 for MySQL / MariaDB: a lease's renewal locks the
-- key's row before it judges the lease's expiry.
-- For a custom table prefix, replace every "sqlock_" first (docs/migrations.md).
-- The procedure body needs the mysql client's DELIMITER lines; sqlock's own
-- migrate() understands them too.
--
-- UTC_TIMESTAMP() is the time the statement began. The renewal was one
-- UPDATE that judged the lease live by that time, and one that waited for a
-- row lock (a select_for_update holder's, the holder's own fenced
-- transaction on a lean key, an inspection) judged it by the time before the
-- wait, and renewed a lease that had expired during it. Now the row is locked
-- first and the UPDATE, a statement of its own, reads the clock after that
-- (as version 14's reader grant and holders' renewal already do; PostgreSQL's
-- renewal and reader grant change in this version too:
-- migrations/postgres/0015_lock_then_judge.sql).

DROP PROCEDURE IF EXISTS sqlock_renew;
DELIMITER //
-- A lease's renewal (sql/mysql/renew.sql). Returns one row: 1 when p_owner's
-- lease of p_key was live once its row was locked, and is renewed by
-- p_lease_ms; else 0. A lock wait past the row lock timeout raises 1205.
CREATE PROCEDURE sqlock_renew(IN p_key VARBINARY(255), IN p_owner VARCHAR(64), IN p_lease_ms BIGINT)
    MODIFIES SQL DATA
BEGIN
    DECLARE v_rows INT DEFAULT 0;
    DECLARE v_renewed INT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION;
    SELECT COUNT(*) INTO v_rows FROM sqlock_locks WHERE lock_key = p_key AND owner = p_owner FOR UPDATE;
    UPDATE sqlock_locks SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (p_lease_ms * 1000) MICROSECOND
     WHERE lock_key = p_key AND owner = p_owner AND expires_at > UTC_TIMESTAMP(6);
    SET v_renewed = ROW_COUNT();
    COMMIT;
    SELECT v_renewed AS renewed;
END//
DELIMITER ;

INSERT IGNORE INTO sqlock_schema_version (version, name) VALUES (15, 'lock_then_judge');
