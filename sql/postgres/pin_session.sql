-- select_for_update: $1 ms. The server ends the holder's transaction (and the
-- connection) once it has been idle that long, so a frozen holder cannot keep
-- the key; the watchdog's pings keep a live one busy. Each ping reads the
-- key's token, so the holder's transaction must see other transactions'
-- commits (a break-glass release) whatever the server's default isolation.
SELECT set_config('idle_in_transaction_session_timeout', $1 || 'ms', false),
       set_config('default_transaction_isolation', 'read committed', false)
