-- select_for_update: ? seconds. MariaDB closes a connection whose transaction
-- has been idle that long, so a frozen holder cannot keep the key; the
-- watchdog's pings keep a live one busy.
SET SESSION idle_transaction_timeout = ?
