-- Deletes up to ?1 expired shared-holder and permit rows (they count nowhere).
DELETE FROM sqlock_holders
 WHERE rowid IN (SELECT rowid FROM sqlock_holders WHERE expires_ms <= sqlock_now_ms() LIMIT ?1)
