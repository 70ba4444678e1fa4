-- The watchdog's renewal of many leases in one statement. The ROWS marker becomes
-- "SELECT ? AS k, ? AS o, ? AS ms UNION ALL SELECT ?, ?, ? ..." with one row
-- of placeholders per lease (key, owner, lease ms). With CLIENT_FOUND_ROWS the
-- affected count is the number renewed.
UPDATE sqlock_locks AS l
  JOIN (/*ROWS*/) AS b ON l.lock_key = b.k AND l.owner = b.o
   SET l.expires_at = UTC_TIMESTAMP(6) + INTERVAL (b.ms * 1000) MICROSECOND
 WHERE l.expires_at > UTC_TIMESTAMP(6)
