-- select_for_update: ? key, ? priority, ? priority, ? ticket, ? key. Runs
-- inside the holder's transaction. The row is free when no committed lease is
-- live on it and no live fair waiter is ahead.
SELECT (owner IS NULL OR expires_at <= UTC_TIMESTAMP(6))
       AND NOT EXISTS (SELECT 1 FROM sqlock_waiters w
                        WHERE w.lock_key = ? AND w.fair AND w.expires_at > UTC_TIMESTAMP(6)
                          AND (w.priority > ? OR (w.priority = ? AND w.ticket < ?))) AS free,
       GREATEST(0, CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000)) AS remaining_ms
  FROM sqlock_locks WHERE lock_key = ? FOR UPDATE NOWAIT
