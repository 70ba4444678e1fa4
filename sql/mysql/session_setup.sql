-- Run once per connection. Lease times are UTC by the server clock whatever
-- the server's time zone; a lock wait bounds a statement stuck behind a
-- select_for_update holder; max_statement_time (MariaDB) bounds any
-- statement; idle_transaction_timeout ends the connection of a process that
-- froze inside one of sqlock's short transactions (a grant, a sweep), so it
-- cannot keep a key's row locked (select_for_update holders set their own).
-- ? lock wait seconds, ? statement time limit seconds, ? idle transaction seconds.
SET SESSION time_zone = '+00:00',
    SESSION innodb_lock_wait_timeout = ?,
    SESSION max_statement_time = ?,
    SESSION idle_transaction_timeout = ?
