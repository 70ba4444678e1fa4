-- Run once per connection. $1 row lock timeout ms, $2 statement timeout ms,
-- $3 true for durability::relaxed: this connection's commits then return
-- before their WAL is flushed (asynchronous commit, a per-session setting;
-- https://www.postgresql.org/docs/15/wal-async-commit.html). When false,
-- synchronous_commit stays as the server, role, database or URL set it.
--
-- The server's side of the socket gets keepalives and a user timeout too,
-- unless the server, role, database or URL chose its own (source not
-- 'default'; the default is the kernel's: two hours before the first probe).
-- A client that gives up on a connection during a partition (its
-- tcp_user_timeout fires) sends nothing the server can see, so without these
-- the server keeps that backend for hours: the fault campaign's long
-- partitions, twenty in a row, filled max_connections (300) with backends of
-- connections their clients had closed. With them a backend whose client is
-- gone ends within ~25 s. Ignored on Unix-domain sockets.
SELECT set_config('lock_timeout', $1 || 'ms', false),
       set_config('statement_timeout', $2 || 'ms', false),
       CASE WHEN $3 THEN set_config('synchronous_commit', 'off', false) END,
       (SELECT count(set_config(d.name, d.value, false))
          FROM (VALUES ('tcp_keepalives_idle', '10'), ('tcp_keepalives_interval', '5'),
                       ('tcp_keepalives_count', '3'), ('tcp_user_timeout', '25000')) AS d(name, value)
          JOIN pg_settings s ON s.name = d.name
         WHERE s.source = 'default')
