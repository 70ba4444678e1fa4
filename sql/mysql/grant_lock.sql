-- Lease-mode acquire, step 1 of a transaction: ? owner, ? key. Locks the
-- key's row and the fence row without waiting (MariaDB reports a held lock as
-- error 1205 at once), so a select_for_update holder means contention, not a wait.
SELECT l.owner IS NULL OR l.expires_at <= UTC_TIMESTAMP(6) OR l.owner = ? AS free,
       GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), l.expires_at) / 1000)) AS remaining_ms
  FROM sqlock_locks l WHERE l.lock_key = ? FOR UPDATE NOWAIT
