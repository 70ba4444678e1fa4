-- The watchdog's renewal of many leases in one statement. The markers become
-- placeholders, one group per lease: PAIRS "(?, ?), (?, ?) ..." (key, owner),
-- KEYS "?, ? ..." (key) and MS "?, ? ..." (its lease ms, in the same order).
-- A single-table UPDATE over a list of primary keys touches those rows only
-- (a join with a derived table may scan, and wait for, anyone's rows). With
-- CLIENT_FOUND_ROWS the affected count is the number renewed. A row another
-- transaction has locked fails the statement at once (a lock wait of 0:
-- 1205), rather than keeping every lease of the batch waiting; the watchdog
-- then renews each lease alone.
SET STATEMENT innodb_lock_wait_timeout = 0 FOR
UPDATE sqlock_locks
   SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (ELT(FIELD(lock_key, /*KEYS*/), /*MS*/) * 1000) MICROSECOND
 WHERE (lock_key, owner) IN (/*PAIRS*/) AND expires_at > UTC_TIMESTAMP(6)
