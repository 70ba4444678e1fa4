# shellcheck shell=bash
# PostgreSQL for scripts/test-servers.sh (sourced after lib.sh): the pg_*
# functions (the interface is described at the top of lib.sh). As root, the
# server runs as the postgres OS user, which owns DIR/pg.

# find_pgbin: prefer PostgreSQL 15 (what Debian 12 ships); fall back to the
# newest installed major version.
find_pgbin() {
  local d
  if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then
    echo /usr/lib/postgresql/15/bin
    return
  fi
  d=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  [[ -n "$d" && -x "$d/postgres" ]] || die "PostgreSQL server binaries not found (run scripts/install-deps.sh)"
  echo "$d"
}

# as_pg CMD...: run CMD as the postgres OS user when we are root (PostgreSQL
# refuses to run as root), from / so an unreadable cwd does not matter.
as_pg() {
  if ((IS_ROOT)); then
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

pg_psql() { # pg_psql DB SQL...: run SQL as superuser postgres over the unix socket
  local db=$1 port
  shift
  port=$(read_port "$PG_PORT_FILE")
  PGOPTIONS='' PGPASSWORD='' psql -X -q -v ON_ERROR_STOP=1 -h "$PG_SOCK_DIR" -p "$port" -U postgres -d "$db" "$@"
}

pg_durability_settings() {
  if ((DURABLE)); then
    printf '%s\n' "# Production durability (SQLOCK_SERVERS_DURABLE=1): the defaults." \
      "fsync = on" "full_page_writes = on" "synchronous_commit = on" "shared_buffers = 256MB"
  else
    printf '%s\n' "# Throwaway data: skip fsync." "fsync = off" "full_page_writes = off"
  fi
}

pg_postmaster_pid() {
  [[ -s "$PG_DATA/postmaster.pid" ]] || return 1
  head -n1 "$PG_DATA/postmaster.pid" 2>/dev/null
}

pg_running() {
  local pid
  pid=$(pg_postmaster_pid) || return 1
  pid_matches "$pid" "$PG_DATA"
}

# pg_pids: the postmaster, then its backends.
pg_pids() {
  local pid
  if ! pid=$(pg_postmaster_pid) || ! pid_matches "$pid" "$PG_DATA"; then
    die "PostgreSQL in $DIR is not running"
  fi
  echo "$pid"
  pgrep -P "$pid" 2>/dev/null || true
}

pg_init() {
  # Start from scratch if a previous init did not finish.
  rm -rf "$PG_DIR"
  mkdir -p "$PG_DATA" "$PG_SOCK_DIR"
  chmod 0700 "$PG_DATA"
  if ((IS_ROOT)); then
    # postgres must be able to reach DIR/pg (traverse only, no listing).
    chmod o+x "$DIR"
    chown -R postgres: "$PG_DIR"
    runuser -u postgres -- test -x "$PG_DIR" ||
      die "user postgres cannot reach $PG_DIR: some parent directory of $DIR is not traversable by others (chmod o+x it, or use a DIR under /tmp)"
  fi
  # -A trust: the tests connect as postgres without a password.
  # --no-sync: data is throwaway. Locale C + UTF8 encoding regardless of the
  # caller's environment (containers often have no LANG).
  if ! as_pg "$PG_BIN/initdb" -D "$PG_DATA" -A trust --no-sync -U postgres \
    -E UTF8 --locale=C >"$DIR/pg-initdb.log" 2>&1; then
    tail -n 30 "$DIR/pg-initdb.log" >&2
    die "initdb failed (full log: $DIR/pg-initdb.log)"
  fi
  # Settings for tests (the port is passed with -p at every start).
  cat >>"$PG_DATA/postgresql.conf" <<EOF

# ---- sqlock test server settings (scripts/test-servers.sh) ----
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PG_SOCK_DIR'
max_connections = 300
max_locks_per_transaction = 128
$(pg_durability_settings)
timezone = 'UTC'
log_timezone = 'UTC'
logging_collector = off
log_line_prefix = '%m [%p] %q%u@%d '
EOF
  # The superuser postgres connects without a password (trust). Every other
  # role must really present its password (scram), so tests that use the
  # sqlock/s3cr3t-pw account exercise genuine password authentication (and a
  # wrong password is a real error whose message must not leak the secret).
  cat >"$PG_DATA/pg_hba.conf" <<'EOF'
# TYPE  DATABASE  USER      ADDRESS        METHOD
local   all       postgres                 trust
host    all       postgres  127.0.0.1/32   trust
local   all       all                      scram-sha-256
host    all       all       127.0.0.1/32   scram-sha-256
EOF
  ((IS_ROOT)) && chown postgres: "$PG_DATA/pg_hba.conf"
  # A topology that sources this file (scripts/ha.sh) adds its settings here.
  if declare -F pg_init_extra >/dev/null; then pg_init_extra; fi
  return 0
}

# After a postmaster died without a clean shutdown (SIGKILL, OOM killer, a
# test killing it), it leaves postmaster.pid and the socket lock file
# .s.PGSQL.<port>.lock behind. If the pid they name is now a zombie (or was
# reused), PostgreSQL refuses to start ("lock file ... already exists").
# Orphaned backends may also still be running for a moment. Call only when
# our postmaster is known not to be running.
pg_clear_stale_state() {
  # Wait (bounded) for orphaned backends: every PostgreSQL process has the
  # data directory as its working directory.
  local p deadline=$((SECONDS + 10)) orphans
  while :; do
    orphans=()
    for p in /proc/[0-9]*; do
      [[ "$(readlink "$p/cwd" 2>/dev/null)" == "$PG_DATA" ]] || continue
      pid_alive "${p#/proc/}" && orphans+=("${p#/proc/}")
    done
    ((${#orphans[@]} == 0)) && break
    if ((SECONDS >= deadline)); then
      log "killing orphaned PostgreSQL processes: ${orphans[*]}"
      kill -KILL "${orphans[@]}" 2>/dev/null || true
      sleep 0.2
      break
    fi
    sleep 0.1
  done
  rm -f "$PG_DATA/postmaster.pid" "$PG_SOCK_DIR"/.s.PGSQL.* 2>/dev/null || true
}

# pg_launch PORT: start the postmaster on PORT and wait until it accepts
# connections. Returns 3 if the port was taken, 1 on other failures.
pg_launch() {
  local port=$1 pid log_offset deadline
  # Only called when our postmaster is not running, so whatever state a
  # killed one left behind is stale.
  if ! pg_running; then
    pg_clear_stale_state
  fi
  : >>"$PG_LOG"
  ((IS_ROOT)) && chown postgres: "$PG_LOG"
  log_offset=$(stat -c %s "$PG_LOG")
  # pg_ctl -w waits until the server is ready (or failed); it also detaches
  # the postmaster into its own session, so it survives our shell.
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$READY_TIMEOUT" \
    -o "-p $port" start >/dev/null 2>"$PG_DIR/pg_ctl.err" 8>&- 9>&-; then
    if tail -c +"$((log_offset + 1))" "$PG_LOG" | grep -q 'Address already in use'; then
      return 3
    fi
    cat "$PG_DIR/pg_ctl.err" >&2 || true
    log "PostgreSQL did not start; tail of $PG_LOG:"
    tail -n 30 "$PG_LOG" >&2 || true
    return 1
  fi
  # Double-check over TCP, which is what the tests use.
  deadline=$((SECONDS + READY_TIMEOUT))
  until pg_isready -q -h 127.0.0.1 -p "$port" -d postgres -U postgres; do
    if ((SECONDS >= deadline)); then
      log "PostgreSQL not accepting TCP connections on 127.0.0.1:$port; tail of $PG_LOG:"
      tail -n 30 "$PG_LOG" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  pid=$(pg_postmaster_pid) || true
  log "PostgreSQL ready on 127.0.0.1:$port (pid ${pid:-?})"
}

# Runs under `|| die`, where set -e is off: every step's status is checked.
pg_setup() {
  local rc=0
  pg_psql postgres <<EOF || rc=$?
CREATE DATABASE $DB_NAME;
CREATE ROLE $APP_USER LOGIN PASSWORD '$APP_PASSWORD';
GRANT ALL PRIVILEGES ON DATABASE $DB_NAME TO $APP_USER;
EOF
  ((rc == 0)) || return "$rc"
  pg_psql "$DB_NAME" <<EOF
GRANT ALL ON SCHEMA public TO $APP_USER;
EOF
}

pg_start_one() {
  PG_BIN=$(find_pgbin)
  start_server PostgreSQL pg
}

# pg_stop clean|crash: stop the postmaster with pg_ctl -m fast (clean) or
# -m immediate (crash: no checkpoint, the next start runs recovery),
# escalating to immediate and then SIGKILL; bounded, idempotent.
pg_stop() {
  local mode=fast pid children child deadline
  [[ "$1" == crash ]] && mode=immediate
  [[ -d "$PG_DATA" ]] || return 0
  pid=$(pg_postmaster_pid) || return 0
  if ! pg_running; then
    # Died on its own (killed?): make sure no orphaned backend lingers.
    pg_clear_stale_state
    return 0
  fi
  PG_BIN=$(find_pgbin)
  # Remember the backends now: if we must SIGKILL the postmaster they are
  # reparented and would otherwise be invisible to us.
  children=$(pgrep -P "$pid" 2>/dev/null || true)
  if ! as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m "$mode" -w -t 20 stop >/dev/null 2>&1 8>&- 9>&-; then
    if [[ "$mode" != immediate ]]; then
      log "PostgreSQL did not stop with -m $mode; trying -m immediate"
      as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -m immediate -w -t 10 stop >/dev/null 2>&1 8>&- 9>&- || true
    fi
  fi
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    log "PostgreSQL postmaster $pid still alive; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || log "WARNING: postmaster $pid did not go away"
  fi
  # Children exit on their own once the postmaster is gone; make sure none
  # is left holding the port/socket before a restart on the same port.
  deadline=$((SECONDS + 10))
  for child in $children; do
    wait_gone "$child" $((deadline > SECONDS ? deadline - SECONDS : 0)) || kill -KILL "$child" 2>/dev/null || true
  done
}
