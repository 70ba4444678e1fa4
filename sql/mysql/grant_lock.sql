-- Lease-mode acquire, step 1 of a transaction: ? owner, ? key, ? priority,
-- ? priority, ? ticket, ? key. Locks the key's row (when it exists) and says
-- whether a live fair waiter is ahead of the requester (higher priority, then
-- lower ticket; a non-fair requester passes the minimum priority and no
-- ticket, so every live fair waiter is ahead of it). Concurrent attempts
-- queue on the row lock for a moment rather than fail; a select_for_update
-- holder makes this wait out innodb_lock_wait_timeout (the client's
-- row_lock_timeout in whole seconds), which then counts as contention.
SELECT l.lock_key IS NOT NULL AS present,
       l.owner IS NULL OR l.expires_at <= UTC_TIMESTAMP(6) OR l.owner = ? AS free,
       GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), l.expires_at) / 1000)) AS remaining_ms,
       EXISTS (SELECT 1 FROM sqlock_waiters w
                WHERE w.lock_key = ? AND w.fair AND w.expires_at > UTC_TIMESTAMP(6)
                  AND (w.priority > ? OR (w.priority = ? AND w.ticket < ?))) AS ahead
  FROM (SELECT 1) AS one LEFT JOIN sqlock_locks l ON l.lock_key = ?
   FOR UPDATE
