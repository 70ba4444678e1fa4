-- The watchdog's renewal of many leases in one statement. The markers become
-- placeholders, one group per lease: PAIRS "(?, ?), (?, ?) ..." (key, owner),
-- OWNERS "?, ? ..." (owner) and MS "?, ? ..." (its lease ms, in the same
-- order). Each row's lease is found by its owner, unique to a grant: by key,
-- FIELD() finds the first lease of that key, and one client may renew two of
-- one key in a batch (a lease broken by force_release, not yet told, and its
-- successor), which gave the successor's row the broken lease's length.
-- A single-table UPDATE over a list of primary keys touches those rows only
-- (a join with a derived table may scan, and wait for, anyone's rows). With
-- CLIENT_FOUND_ROWS the affected count is the number renewed. A row another
-- transaction has locked fails the statement at once (a lock wait of 0:
-- 1205), rather than keeping every lease of the batch waiting; the watchdog
-- then renews each lease alone.
SET STATEMENT innodb_lock_wait_timeout = 0 FOR
UPDATE sqlock_locks
   SET expires_at = UTC_TIMESTAMP(6) + INTERVAL (ELT(FIELD(owner, /*OWNERS*/), /*MS*/) * 1000) MICROSECOND
 WHERE (lock_key, owner) IN (/*PAIRS*/) AND expires_at > UTC_TIMESTAMP(6)
