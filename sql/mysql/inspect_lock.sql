-- ? key. The lease as committed.
SELECT owner, mode, holder, note,
       CASE WHEN owner IS NOT NULL AND expires_at > UTC_TIMESTAMP(6)
            THEN CEIL(TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at) / 1000) END AS remaining_ms
  FROM sqlock_locks WHERE lock_key = ?
