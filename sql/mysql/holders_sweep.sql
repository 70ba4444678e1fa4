-- Deletes up to ? expired shared-holder and permit rows (they count nowhere).
DELETE FROM sqlock_holders WHERE expires_at <= UTC_TIMESTAMP(6) LIMIT ?
