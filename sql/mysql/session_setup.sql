-- Run once per connection. Lease times are UTC by the server clock whatever
-- the server's time zone; a lock wait bounds a statement stuck behind a
-- select_for_update holder; max_statement_time (MariaDB) bounds any statement.
-- ? lock wait seconds, ? statement time limit seconds.
SET SESSION time_zone = '+00:00',
    SESSION innodb_lock_wait_timeout = ?,
    SESSION max_statement_time = ?
