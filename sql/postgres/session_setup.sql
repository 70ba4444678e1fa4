-- Run once per connection. $1 row lock timeout ms, $2 statement timeout ms,
-- $3 true for durability::relaxed: this connection's commits then return
-- before their WAL is flushed (asynchronous commit, a per-session setting;
-- https://www.postgresql.org/docs/15/wal-async-commit.html). When false,
-- synchronous_commit stays as the server, role, database or URL set it.
SELECT set_config('lock_timeout', $1 || 'ms', false),
       set_config('statement_timeout', $2 || 'ms', false),
       CASE WHEN $3 THEN set_config('synchronous_commit', 'off', false) END
