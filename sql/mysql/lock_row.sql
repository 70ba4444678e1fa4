-- select_for_update: ? key. Runs inside the holder's transaction.
SELECT owner IS NULL OR expires_at <= UTC_TIMESTAMP(6) AS free,
       GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)) AS remaining_ms
  FROM sqlock_locks WHERE lock_key = ? FOR UPDATE NOWAIT
