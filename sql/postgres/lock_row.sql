-- select_for_update: $1 key. Runs inside the holder's transaction. NOWAIT
-- turns a held row lock into SQLSTATE 55P03 at once. A row whose committed
-- lease is live is held by a lease mode.
SELECT owner IS NULL OR expires_at <= clock_timestamp() AS free,
       greatest(0, ceil(extract(epoch FROM (expires_at - clock_timestamp())) * 1000))::bigint AS remaining_ms
  FROM sqlock_locks WHERE lock_key = $1 FOR UPDATE NOWAIT
