# shellcheck shell=bash
# PgBouncer in transaction pooling mode in front of a PostgreSQL server, for
# scripts/ha.sh (sourced after lib.sh and postgres.sh): the pb_* functions.
# The server is a postgres.sh server in HA/b; PgBouncer's files are in
# HA/bouncer (pgbouncer.ini, userlist.txt, pgbouncer.log, pgbouncer.pid,
# port). PgBouncer refuses to run as root: as root it runs as postgres.

PB_DIR_NAME=bouncer

pb_paths() {
  PB_DIR=$HA/$PB_DIR_NAME
  PB_INI=$PB_DIR/pgbouncer.ini
  PB_PID_FILE=$PB_DIR/pgbouncer.pid
  PB_LOG=$PB_DIR/pgbouncer.log
  PB_PORT_FILE=$PB_DIR/port
}

pb_pid() { [[ -s "$PB_PID_FILE" ]] && head -n1 "$PB_PID_FILE"; }
pb_running() {
  local pid
  pid=$(pb_pid) || return 1
  pid_matches "$pid" "$PB_INI"
}

# pb_write_ini PORT SERVER_PORT
pb_write_ini() {
  local port=$1 server_port=$2
  # auth_type trust still needs the user in auth_file. One pool per
  # (database, user); a held transaction pins a server connection, so the
  # pool is larger than the tests' concurrent transactions.
  printf '"postgres" ""\n' >"$PB_DIR/userlist.txt"
  cat >"$PB_INI" <<EOF
; sqlock throwaway PgBouncer (scripts/ha.sh)
[databases]
$DB_NAME = host=127.0.0.1 port=$server_port dbname=$DB_NAME

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $PB_DIR/userlist.txt
admin_users = postgres
pool_mode = transaction
max_client_conn = 1000
default_pool_size = 40
logfile = $PB_LOG
pidfile = $PB_PID_FILE
log_connections = 0
log_disconnections = 0
EOF
  ((IS_ROOT)) && chown -R postgres: "$PB_DIR"
  return 0
}

# pb_launch PORT: start PgBouncer on PORT (daemonised) and wait until it
# answers. Returns 3 if the port was taken, 1 on other failures.
pb_launch() {
  local port=$1 pgbouncer deadline
  pgbouncer=$(find_cmd pgbouncer)
  pb_write_ini "$port" "$(read_port "$HA/b/pg/port")"
  : >"$PB_LOG"
  ((IS_ROOT)) && chown postgres: "$PB_LOG"
  if ! as_pg "$pgbouncer" -d "$PB_INI" >>"$PB_DIR/pgbouncer.out" 2>&1 8>&- 9>&-; then
    grep -q 'Address already in use' "$PB_LOG" "$PB_DIR/pgbouncer.out" 2>/dev/null && return 3
    tail -n 20 "$PB_LOG" "$PB_DIR/pgbouncer.out" >&2
    return 1
  fi
  deadline=$((SECONDS + READY_TIMEOUT))
  until PGOPTIONS='' psql -X -q -A -t -h 127.0.0.1 -p "$port" -U postgres -d "$DB_NAME" -c 'SELECT 1' >/dev/null 2>&1; do
    if ! pb_running || ((SECONDS >= deadline)); then
      grep -q 'Address already in use' "$PB_LOG" 2>/dev/null && return 3
      log "PgBouncer not answering on 127.0.0.1:$port; tail of $PB_LOG:"
      tail -n 20 "$PB_LOG" >&2
      return 1
    fi
    sleep 0.02
  done
  log "PgBouncer ready on 127.0.0.1:$port (pid $(pb_pid))"
}

pb_start() {
  local port rc attempt
  set_paths "$HA/b"
  mkdir -p "$DIR"
  PG_BIN=$(find_pgbin)
  start_server "PostgreSQL behind PgBouncer" pg
  pb_paths
  mkdir -p "$PB_DIR"
  ((IS_ROOT)) && chmod o+x "$HA"
  for attempt in 1 2 3 4 5; do
    lock_ports
    port=$(pick_port)
    echo "$port" >"$PB_PORT_FILE"
    rc=0
    pb_launch "$port" || rc=$?
    unlock_ports
    ((rc == 3)) && { log "port $port was taken; retrying (attempt $attempt)"; continue; }
    ((rc == 0)) || die "PgBouncer failed to start"
    # sqlock_pool_mode=transaction: sqlock's pooling-safe path (docs/urls.md).
    ha_env_add SQLOCK_TEST_HA_PGBOUNCER_URL \
      "postgresql://postgres@127.0.0.1:$port/$DB_NAME?sqlock_pool_mode=transaction"
    ha_env_add SQLOCK_TEST_HA_PGBOUNCER_DIRECT_URL "postgresql://postgres@127.0.0.1:$(read_port "$PG_PORT_FILE")/$DB_NAME"
    return 0
  done
  die "PgBouncer: no free port after 5 attempts"
}

pb_stop() {
  local pid
  pb_paths
  if pid=$(pb_pid) && pb_running; then
    kill -INT "$pid" 2>/dev/null || true  # SIGINT: shut down at once (SIGTERM waits for clients)
    wait_gone "$pid" 10 || kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ -d "$HA/b/pg" ]]; then
    set_paths "$HA/b"
    pg_stop clean
  fi
}

pb_status() {
  pb_paths
  [[ -d "$PB_DIR" ]] || return 0
  if pb_running; then echo "pgbouncer: running (port $(read_port "$PB_PORT_FILE"), pid $(pb_pid))"; else echo "pgbouncer: stopped"; fi
}
