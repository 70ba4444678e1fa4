-- durability::relaxed, run once per connection. In WAL mode NORMAL syncs the
-- WAL at checkpoints instead of at every commit: a commit survives a crash of
-- the process, but an OS crash or power loss can roll back the last ones
-- (https://www.sqlite.org/pragma.html#pragma_synchronous). strict runs nothing
-- and keeps the build default, FULL: the WAL is synced at every commit.
PRAGMA synchronous = NORMAL
