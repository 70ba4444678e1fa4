-- For the migration transaction only: its advisory lock waits for another
-- migrator as long as MariaDB's does (120 s), not the row lock timeout
-- (200 ms by default), which lock_timeout is set to and which applies to
-- advisory locks too: a second process migrating a fresh schema failed
-- with 55P03 while the first was still at work. Nor does the client's
-- statement timeout cut the migration's DDL short; lock_timeout still
-- bounds its waits for the tables, which applications' transactions may
-- hold.
SELECT set_config('lock_timeout', '120s', true), set_config('statement_timeout', '0', true)
