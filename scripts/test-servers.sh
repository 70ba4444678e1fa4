#!/usr/bin/env bash
# Throwaway PostgreSQL 15 + MariaDB 10.11 servers for sqlock's integration tests.
#
# Usage:
#   test-servers.sh start DIR                    init (if needed) and start both, write DIR/env
#   test-servers.sh stop DIR                     stop both (idempotent, bounded, never hangs)
#   test-servers.sh restart postgres|mysql DIR   crash-stop one server and start it again
#                                                on the same port/socket/data
#   test-servers.sh stop-one postgres|mysql DIR  clean fast stop of one server
#   test-servers.sh start-one postgres|mysql DIR start one server again on its saved port
#   test-servers.sh freeze postgres|mysql DIR    SIGSTOP the whole server (postmaster and every
#                                                backend; mariadbd): it stops answering, its
#                                                kernel still acknowledges packets
#   test-servers.sh thaw postgres|mysql DIR      SIGCONT what freeze stopped
#   test-servers.sh status DIR                   print which servers are running
#
# Everything (data, sockets, logs, ports) lives under DIR, so every subcommand
# works from a fresh shell, and several test runs can share one machine: each
# run gets its own randomly chosen free ports (chosen under a machine-wide lock
# so concurrent starts cannot pick the same port).
#
# Layout of DIR:
#   env                     shell-sourceable SQLOCK_TEST_* variables (written by start)
#   .lock                   per-DIR lock: subcommands on one DIR run one at a time
#   pg/data                 PGDATA (owned by postgres when we run as root)
#   pg/run                  PostgreSQL unix socket directory
#   pg/postgres.log         PostgreSQL server log
#   pg/port, pg/.initialized
#   my/my.cnf               MariaDB config (--defaults-file)
#   my/data my/tmp          datadir and tmpdir
#   my/mariadb.sock         MariaDB unix socket
#   my/error.log            MariaDB server log (my/mariadbd.out: stdout/stderr)
#   my/mariadbd.pid         pid of the mariadbd we launched
#   my/port, my/.initialized
set -euo pipefail

readonly PROG=${0##*/}
readonly DB_NAME=sqlock_test
readonly APP_USER=sqlock
readonly APP_PASSWORD=s3cr3t-pw
readonly READY_TIMEOUT=30     # seconds to wait for a server to accept connections
readonly STOP_TIMEOUT=30      # seconds to wait for a server process to go away
readonly PORT_LOCK=/tmp/sqlock-test-servers-ports.lock

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() { # usage [EXIT_CODE]
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}

IS_ROOT=0
[[ "$(id -u)" -eq 0 ]] && IS_ROOT=1

# SQLOCK_SERVERS_DURABLE=1 (read when a server directory is first
# initialised): production durability, every commit flushed to disk, for the
# benchmarks (scripts/bench.sh). The default skips fsync: the tests' data is
# throwaway, and a killed server process still loses nothing because written
# pages stay in the OS page cache.
DURABLE=0
[[ "${SQLOCK_SERVERS_DURABLE:-0}" == 1 ]] && DURABLE=1

pg_durability_settings() {
  if ((DURABLE)); then
    printf '%s\n' "# Production durability (SQLOCK_SERVERS_DURABLE=1): the defaults." \
      "fsync = on" "full_page_writes = on" "synchronous_commit = on" "shared_buffers = 256MB"
  else
    printf '%s\n' "# Throwaway data: skip fsync." "fsync = off" "full_page_writes = off"
  fi
}

my_durability_settings() {
  if ((DURABLE)); then
    printf '%s\n' "# Production durability (SQLOCK_SERVERS_DURABLE=1): flush the redo log at every commit." \
      "innodb_flush_log_at_trx_commit=1" "innodb_doublewrite=1"
  else
    printf '%s\n' "# Throwaway data: skip fsync at commit, no doublewrite." \
      "innodb_flush_log_at_trx_commit=2" "innodb_doublewrite=0"
  fi
}

# ---------------------------------------------------------------------------
# Locating binaries
# ---------------------------------------------------------------------------
find_pgbin() {
  # Prefer PostgreSQL 15 (what Debian 12 ships); fall back to the newest
  # installed major version.
  local d
  if [[ -x /usr/lib/postgresql/15/bin/postgres ]]; then
    echo /usr/lib/postgresql/15/bin
    return
  fi
  d=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -n1)
  [[ -n "$d" && -x "$d/postgres" ]] || die "PostgreSQL server binaries not found (run scripts/install-deps.sh)"
  echo "$d"
}

find_cmd() {
  # find_cmd NAME... : print the first of NAME... that is on PATH (or in
  # /usr/sbin, which a non-root PATH often lacks).
  local c
  for c in "$@"; do
    if command -v "$c" >/dev/null 2>&1; then command -v "$c"; return; fi
    if [[ -x "/usr/sbin/$c" ]]; then echo "/usr/sbin/$c"; return; fi
  done
  die "none of [$*] found (run scripts/install-deps.sh)"
}

# ---------------------------------------------------------------------------
# Process helpers
# ---------------------------------------------------------------------------

# pid_alive PID: true if PID exists and is not a zombie. Stopped servers can
# linger as zombies for seconds on these machines (PID 1 reaps lazily), so a
# zombie counts as gone: it holds no ports, sockets, file locks or memory.
pid_alive() {
  local pid=$1 stat
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  stat=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  stat=${stat//[[:space:]]/}
  [[ -n "$stat" && "$stat" != Z* ]]
}

# pid_matches PID NEEDLE: the live process PID has NEEDLE in its command line.
# Guards against signalling an unrelated process that reused a stale pid.
pid_matches() {
  local pid=$1 needle=$2 cmdline
  pid_alive "$pid" || return 1
  cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ "$cmdline" == *"$needle"* ]]
}

# wait_gone PID SECONDS: wait (bounded) until PID is gone or a zombie.
wait_gone() {
  local pid=$1 secs=$2 deadline
  deadline=$((SECONDS + secs))
  while pid_alive "$pid"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.1
  done
  return 0
}

# ---------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------

# port_in_use PORT: any TCP socket (listening or connected) uses PORT locally.
port_in_use() {
  local port=$1
  if command -v ss >/dev/null 2>&1; then
    [[ -n "$(ss -Htan "( sport = :$port )" 2>/dev/null)" ]]
  else
    # Fallback probe: a successful connect means somebody listens there.
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null
  fi
}

# pick_port: print a random free port below the kernel's ephemeral range (so
# outgoing connections cannot be handed the port while a server is down for
# stop-one/start-one or restart). Caller must hold the machine-wide port lock
# until the server actually listens.
pick_port() {
  local lo=15000 hi eph_lo port i
  eph_lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  hi=$((eph_lo - 1))
  if ((hi - lo < 2000)); then lo=20000; hi=30000; fi
  for ((i = 0; i < 200; i++)); do
    port=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
    if ! port_in_use "$port"; then
      echo "$port"
      return 0
    fi
  done
  die "could not find a free TCP port in $lo-$hi"
}

# Machine-wide lock held while choosing a port and starting a server on it, so
# two concurrent `start`s cannot pick the same free port. fd 8.
lock_ports() {
  if ! { exec 8>>"$PORT_LOCK"; } 2>/dev/null; then
    # Created by another user: a read-only fd is enough for flock.
    exec 8<"$PORT_LOCK" || die "cannot open $PORT_LOCK"
  fi
  chmod 0666 "$PORT_LOCK" 2>/dev/null || true
  flock -w 120 8 || die "timed out waiting for $PORT_LOCK"
}
unlock_ports() { exec 8>&-; }

# Per-DIR lock (fd 9): tests running in parallel may call restart/stop-one on
# the same DIR; their subcommands run one after another instead of interleaving.
lock_dir() {
  exec 9>>"$DIR/.lock" || die "cannot open $DIR/.lock"
  flock -w 300 9 || die "timed out waiting for $DIR/.lock"
}

# NOTE: every long-running server we launch gets `8>&- 9>&-` so it does not
# inherit (and keep holding) the lock file descriptors.

# ---------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------
set_paths() {
  DIR=$(realpath -m -- "$1")
  PG_DIR=$DIR/pg
  PG_DATA=$PG_DIR/data
  PG_SOCK_DIR=$PG_DIR/run
  PG_LOG=$PG_DIR/postgres.log
  PG_PORT_FILE=$PG_DIR/port
  MY_DIR=$DIR/my
  MY_DATA=$MY_DIR/data
  MY_TMP=$MY_DIR/tmp
  MY_CNF=$MY_DIR/my.cnf
  MY_SOCK=$MY_DIR/mariadb.sock
  MY_LOG=$MY_DIR/error.log
  MY_OUT=$MY_DIR/mariadbd.out
  MY_PID_FILE=$MY_DIR/mariadbd.pid
  MY_PORT_FILE=$MY_DIR/port
}

check_socket_lengths() {
  # sun_path is 108 bytes including the NUL terminator. PostgreSQL's socket is
  # <dir>/.s.PGSQL.<port> (port up to 5 digits).
  local pg_sock="$PG_SOCK_DIR/.s.PGSQL.65535"
  ((${#pg_sock} < 107)) || die "socket path too long (${#pg_sock} bytes): $pg_sock; use a shorter DIR"
  ((${#MY_SOCK} < 107)) || die "socket path too long (${#MY_SOCK} bytes): $MY_SOCK; use a shorter DIR"
}

read_port() { # read_port FILE
  [[ -s "$1" ]] || return 1
  local p
  p=$(<"$1")
  [[ "$p" =~ ^[0-9]+$ ]] || return 1
  echo "$p"
}

# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------

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

pg_postmaster_pid() {
  [[ -s "$PG_DATA/postmaster.pid" ]] || return 1
  head -n1 "$PG_DATA/postmaster.pid" 2>/dev/null
}

pg_running() {
  local pid
  pid=$(pg_postmaster_pid) || return 1
  pid_matches "$pid" "$PG_DATA"
}

pg_init() {
  local pgbin=$1
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
  if ! as_pg "$pgbin/initdb" -D "$PG_DATA" -A trust --no-sync -U postgres \
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

# pg_launch PGBIN PORT: start the postmaster on PORT and wait until it accepts
# connections. Returns 3 if the port was taken, 1 on other failures.
pg_launch() {
  local pgbin=$1 port=$2 pid
  # A postmaster killed with SIGKILL leaves postmaster.pid behind; if that pid
  # is now a zombie (or reused), PostgreSQL would refuse to start. We only get
  # here when our postmaster is not running, so the file is stale.
  if ! pg_running; then
    pg_clear_stale_state
  fi
  : >>"$PG_LOG"
  ((IS_ROOT)) && chown postgres: "$PG_LOG"
  local log_offset
  log_offset=$(stat -c %s "$PG_LOG")
  # pg_ctl -w waits until the server is ready (or failed); it also detaches
  # the postmaster into its own session, so it survives our shell.
  if ! as_pg "$pgbin/pg_ctl" -D "$PG_DATA" -l "$PG_LOG" -w -t "$READY_TIMEOUT" \
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
  local deadline=$((SECONDS + READY_TIMEOUT))
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

pg_setup() {
  pg_psql postgres <<EOF
CREATE DATABASE $DB_NAME;
CREATE ROLE $APP_USER LOGIN PASSWORD '$APP_PASSWORD';
GRANT ALL PRIVILEGES ON DATABASE $DB_NAME TO $APP_USER;
EOF
  pg_psql "$DB_NAME" <<EOF
GRANT ALL ON SCHEMA public TO $APP_USER;
EOF
}

# pg_start_one: start PostgreSQL; initialise it and choose a port first
# if DIR has no initialised server yet.
pg_start_one() {
  local pgbin port rc attempt
  pgbin=$(find_pgbin)
  if pg_running; then
    log "PostgreSQL already running on port $(read_port "$PG_PORT_FILE" || echo '?')"
    return 0
  fi
  if [[ -e "$PG_DIR/.initialized" ]] && port=$(read_port "$PG_PORT_FILE"); then
    pg_launch "$pgbin" "$port" || { rc=$?; ((rc == 3)) && log "port $port is taken by another process"; die "PostgreSQL failed to start on port $port"; }
    return 0
  fi
  pg_init "$pgbin"
  for attempt in 1 2 3 4 5; do
    lock_ports
    port=$(pick_port)
    echo "$port" >"$PG_PORT_FILE"
    rc=0
    pg_launch "$pgbin" "$port" || rc=$?
    unlock_ports
    ((rc == 3)) && { log "port $port was taken; retrying (attempt $attempt)"; continue; }
    ((rc == 0)) || die "PostgreSQL failed to start"
    pg_setup || die "PostgreSQL setup (database/role creation) failed"
    touch "$PG_DIR/.initialized"
    return 0
  done
  die "PostgreSQL: no free port after 5 attempts"
}

# pg_stop MODE: stop the postmaster (fast or immediate), escalating to
# immediate and then SIGKILL; bounded, idempotent.
pg_stop() {
  local mode=$1 pgbin pid
  [[ -d "$PG_DATA" ]] || return 0
  pid=$(pg_postmaster_pid) || return 0
  if ! pg_running; then
    # Died on its own (killed?): make sure no orphaned backend lingers.
    pg_clear_stale_state
    return 0
  fi
  pgbin=$(find_pgbin)
  # Remember the backends now: if we must SIGKILL the postmaster they are
  # reparented and would otherwise be invisible to us.
  local children
  children=$(pgrep -P "$pid" 2>/dev/null || true)
  if ! as_pg "$pgbin/pg_ctl" -D "$PG_DATA" -m "$mode" -w -t 20 stop >/dev/null 2>&1 8>&- 9>&-; then
    if [[ "$mode" != immediate ]]; then
      log "PostgreSQL did not stop with -m $mode; trying -m immediate"
      as_pg "$pgbin/pg_ctl" -D "$PG_DATA" -m immediate -w -t 10 stop >/dev/null 2>&1 8>&- 9>&- || true
    fi
  fi
  if ! wait_gone "$pid" "$STOP_TIMEOUT"; then
    log "PostgreSQL postmaster $pid still alive; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || log "WARNING: postmaster $pid did not go away"
  fi
  # Children exit on their own once the postmaster is gone; make sure none
  # is left holding the port/socket before a restart on the same port.
  local child deadline=$((SECONDS + 10))
  for child in $children; do
    wait_gone "$child" $((deadline > SECONDS ? deadline - SECONDS : 0)) || kill -KILL "$child" 2>/dev/null || true
  done
}

# ---------------------------------------------------------------------------
# MariaDB
# ---------------------------------------------------------------------------
my_admin() { # my_admin ARGS...: mariadb-admin as root over the unix socket
  timeout 20 mariadb-admin --no-defaults --protocol=socket -S "$MY_SOCK" -uroot "$@"
}
my_sql() { # my_sql [CLIENT_ARGS...] < SQL: run SQL as root over the unix socket
  timeout 60 mariadb --no-defaults --protocol=socket -S "$MY_SOCK" -uroot "$@"
}

my_pid() {
  [[ -s "$MY_PID_FILE" ]] || return 1
  head -n1 "$MY_PID_FILE"
}

my_running() {
  local pid
  pid=$(my_pid) || return 1
  pid_matches "$pid" "$MY_CNF"
}

my_init() {
  rm -rf "$MY_DIR"
  mkdir -p "$MY_DATA" "$MY_TMP"
  local user_line=""
  # mariadbd refuses to run as root unless told to; as root we simply run it
  # as root (everything is private to DIR, so no chown dance is needed).
  ((IS_ROOT)) && user_line="user=root"
  # NOTE: innodb-fast-shutdown=2 must NOT be in this file (it breaks
  # mariadb-install-db); it is passed on the mariadbd command line instead.
  cat >"$MY_CNF" <<EOF
# sqlock throwaway test server (scripts/test-servers.sh)
[mysqld]
$user_line
datadir=$MY_DATA
tmpdir=$MY_TMP
socket=$MY_SOCK
pid-file=$MY_DIR/mariadb.pid
log-error=$MY_LOG
bind-address=127.0.0.1
character-set-server=utf8mb4
max_connections=500
# Tests kill connections on purpose; never block 127.0.0.1 for that.
max_connect_errors=1000000
# No DNS lookups: faster connects, and root@127.0.0.1 matches literally.
skip-name-resolve
skip-external-locking
performance_schema=OFF
innodb_buffer_pool_size=$( ((DURABLE)) && echo 256M || echo 64M)
innodb_log_file_size=48M
$(my_durability_settings)

[client]
socket=$MY_SOCK
user=root
EOF
  if ! mariadb-install-db --defaults-file="$MY_CNF" --auth-root-authentication-method=normal \
    --skip-test-db >"$DIR/my-install-db.log" 2>&1; then
    tail -n 30 "$DIR/my-install-db.log" >&2
    die "mariadb-install-db failed (full log: $DIR/my-install-db.log)"
  fi
}

# my_launch PORT: start mariadbd on PORT and wait until it accepts
# connections. Returns 3 if the port was taken, 1 on other failures.
my_launch() {
  local port=$1 mariadbd pid log_offset deadline
  mariadbd=$(find_cmd mariadbd mysqld)
  : >>"$MY_LOG"
  log_offset=$(stat -c %s "$MY_LOG")
  # setsid: own session, so a test runner killing its process group (or a
  # Ctrl-C) does not take the server down behind our back. All output goes to
  # files so command substitutions in callers never wait on our stdout.
  # The inner shell records its own pid and then execs mariadbd, so the pid
  # file names the server itself whether or not setsid had to fork.
  rm -f "$MY_PID_FILE"
  # shellcheck disable=SC2016 # $$ and $1 are for the inner shell
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' sqlock-mariadbd "$MY_PID_FILE" \
    "$mariadbd" --defaults-file="$MY_CNF" --port="$port" --innodb-fast-shutdown=2 \
    </dev/null >>"$MY_OUT" 2>&1 8>&- 9>&- &
  deadline=$((SECONDS + READY_TIMEOUT))
  until pid=$(my_pid 2>/dev/null) && [[ -n "$pid" ]]; do
    ((SECONDS < deadline)) || { log "mariadbd launcher never wrote $MY_PID_FILE"; return 1; }
    sleep 0.02
  done
  while :; do
    if ! pid_alive "$pid"; then
      if tail -c +"$((log_offset + 1))" "$MY_LOG" | grep -q 'Address already in use'; then
        return 3
      fi
      log "mariadbd exited during startup; tail of $MY_LOG:"
      tail -n 30 "$MY_LOG" >&2 || true
      tail -n 10 "$MY_OUT" >&2 || true
      return 1
    fi
    # ping succeeds once the server answers (even "access denied" counts).
    if timeout 5 mariadb-admin --no-defaults --protocol=tcp -h 127.0.0.1 -P "$port" -uroot \
      --connect-timeout=2 ping >/dev/null 2>&1 &&
      my_admin --connect-timeout=2 ping >/dev/null 2>&1; then
      break
    fi
    if ((SECONDS >= deadline)); then
      log "MariaDB not ready after ${READY_TIMEOUT}s; tail of $MY_LOG:"
      tail -n 30 "$MY_LOG" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  log "MariaDB ready on 127.0.0.1:$port (pid $pid)"
}

my_setup() {
  # root has an empty password (--auth-root-authentication-method=normal).
  # With skip-name-resolve a TCP connection from 127.0.0.1 only matches
  # 'root'@'127.0.0.1', so make sure that account exists without a password.
  # The sqlock account has a real password so tests can prove it never leaks.
  my_sql <<EOF
CREATE DATABASE IF NOT EXISTS $DB_NAME CHARACTER SET utf8mb4;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS '$APP_USER'@'%' IDENTIFIED BY '$APP_PASSWORD';
CREATE USER IF NOT EXISTS '$APP_USER'@'localhost' IDENTIFIED BY '$APP_PASSWORD';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$APP_USER'@'%';
GRANT ALL PRIVILEGES ON $DB_NAME.* TO '$APP_USER'@'localhost';
EOF
  # mariadb-install-db also creates root@<hostname>; with skip-name-resolve
  # that account can never match and only makes the server log a warning on
  # every privilege reload. Drop accounts for hosts we never connect from.
  local u
  while IFS= read -r u; do
    [[ -n "$u" ]] && echo "DROP USER IF EXISTS $u;" | my_sql
  done < <(echo "SELECT CONCAT(QUOTE(User),'@',QUOTE(Host)) FROM mysql.user
                 WHERE Host NOT IN ('localhost','127.0.0.1','::1','%');" | my_sql -N)
  return 0
}

my_start_one() {
  local port rc attempt
  if my_running; then
    log "MariaDB already running on port $(read_port "$MY_PORT_FILE" || echo '?')"
    return 0
  fi
  if [[ -e "$MY_DIR/.initialized" ]] && port=$(read_port "$MY_PORT_FILE"); then
    my_launch "$port" || { rc=$?; ((rc == 3)) && log "port $port is taken by another process"; die "MariaDB failed to start on port $port"; }
    return 0
  fi
  my_init
  for attempt in 1 2 3 4 5; do
    lock_ports
    port=$(pick_port)
    echo "$port" >"$MY_PORT_FILE"
    rc=0
    my_launch "$port" || rc=$?
    unlock_ports
    ((rc == 3)) && { log "port $port was taken; retrying (attempt $attempt)"; continue; }
    ((rc == 0)) || die "MariaDB failed to start"
    my_setup || die "MariaDB setup (database/user creation) failed"
    touch "$MY_DIR/.initialized"
    return 0
  done
  die "MariaDB: no free port after 5 attempts"
}

# my_stop clean|kill: clean = SIGTERM (normal shutdown), SIGKILL if it hangs;
# kill = SIGKILL right away (simulated crash). Bounded, idempotent.
my_stop() {
  local how=$1 pid
  pid=$(my_pid) || return 0
  my_running || return 0
  if [[ "$how" == kill ]]; then
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" "$STOP_TIMEOUT" || log "WARNING: mariadbd $pid did not go away after SIGKILL"
    return 0
  fi
  # SIGTERM is mariadbd's normal shutdown (same as `mariadb-admin shutdown`,
  # which however polls the pid file once a second and so adds ~1 s).
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" 25; then
    log "mariadbd $pid still alive after SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 5 || log "WARNING: mariadbd $pid did not go away"
  fi
}

# ---------------------------------------------------------------------------
# env file
# ---------------------------------------------------------------------------
write_env() {
  local pg_port my_port tmp
  pg_port=$(read_port "$PG_PORT_FILE") || die "no PostgreSQL port recorded"
  my_port=$(read_port "$MY_PORT_FILE") || die "no MariaDB port recorded"
  tmp=$DIR/env.tmp
  {
    printf '%s=%q\n' SQLOCK_TEST_POSTGRES_URL "postgresql://postgres@127.0.0.1:$pg_port/$DB_NAME"
    printf '%s=%q\n' SQLOCK_TEST_MYSQL_URL "mysql://root@127.0.0.1:$my_port/$DB_NAME"
    printf '%s=%q\n' SQLOCK_TEST_POSTGRES_SOCKET_DIR "$PG_SOCK_DIR"
    printf '%s=%q\n' SQLOCK_TEST_MYSQL_SOCKET "$MY_SOCK"
    printf '%s=%q\n' SQLOCK_TEST_SERVER_DIR "$DIR"
  } >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$DIR/env"
}

# ---------------------------------------------------------------------------
# Subcommands
# ---------------------------------------------------------------------------
cmd_start() {
  local t0=$SECONDS
  mkdir -p "$DIR"
  check_socket_lengths
  lock_dir
  pg_start_one
  my_start_one
  write_env
  log "servers started in $((SECONDS - t0))s; $DIR/env:"
  cat "$DIR/env"
}

cmd_stop() {
  if [[ ! -d "$DIR" ]]; then
    log "$DIR does not exist; nothing to stop"
    return 0
  fi
  local t0=$SECONDS
  lock_dir
  # Stop both in parallel: halves the wall time of the common case.
  local rc=0
  pg_stop fast &
  local pg_job=$!
  my_stop clean || rc=1
  wait "$pg_job" || rc=1
  log "servers stopped in $((SECONDS - t0))s"
  return "$rc"
}

require_initialized() { # require_initialized postgres|mysql
  local d
  case $1 in postgres) d=$PG_DIR ;; mysql) d=$MY_DIR ;; esac
  [[ -e "$d/.initialized" ]] || die "$1 server in $DIR was never started (run '$PROG start $DIR' first)"
}

cmd_restart() {
  local which=$1
  require_initialized "$which"
  lock_dir
  case $which in
    postgres)
      # -m immediate: like a crash (no checkpoint); startup runs recovery.
      pg_stop immediate
      pg_start_one
      ;;
    mysql)
      # SIGKILL: a real crash; InnoDB crash recovery on startup.
      my_stop kill
      my_start_one
      ;;
  esac
}

cmd_stop_one() {
  local which=$1
  [[ -d "$DIR" ]] || { log "$DIR does not exist; nothing to stop"; return 0; }
  lock_dir
  case $which in
    postgres) pg_stop fast ;;
    mysql) my_stop clean ;;
  esac
  log "$which stopped"
}

cmd_start_one() {
  local which=$1
  require_initialized "$which"
  check_socket_lengths
  lock_dir
  case $which in
    postgres) pg_start_one ;;
    mysql) my_start_one ;;
  esac
}

# server_pids postgres|mysql: the server's processes, the postmaster first.
server_pids() {
  local pid
  case $1 in
    postgres)
      pid=$(pg_postmaster_pid) && pid_matches "$pid" "$PG_DATA" || die "PostgreSQL in $DIR is not running"
      echo "$pid"
      pgrep -P "$pid" 2>/dev/null || true
      ;;
    mysql)
      pid=$(my_pid) && pid_matches "$pid" "$MY_CNF" || die "MariaDB in $DIR is not running"
      echo "$pid"
      ;;
  esac
}

cmd_freeze() {
  local which=$1
  require_initialized "$which"
  lock_dir
  # The postmaster first, so that it forks no new backend that escapes.
  # shellcheck disable=SC2046 # one pid per word
  kill -STOP $(server_pids "$which")
  log "$which frozen"
}

cmd_thaw() {
  local which=$1
  require_initialized "$which"
  lock_dir
  # shellcheck disable=SC2046
  kill -CONT $(server_pids "$which")
  log "$which thawed"
}

cmd_status() {
  local rc=0
  if pg_running; then echo "postgres: running (port $(read_port "$PG_PORT_FILE"), pid $(pg_postmaster_pid))"; else echo "postgres: stopped"; rc=1; fi
  if my_running; then echo "mysql: running (port $(read_port "$MY_PORT_FILE"), pid $(my_pid))"; else echo "mysql: stopped"; rc=1; fi
  return "$rc"
}

server_arg() {
  case ${1:-} in
    postgres | postgresql | pg) echo postgres ;;
    mysql | mariadb | my) echo mysql ;;
    *) log "expected 'postgres' or 'mysql', got '${1:-}'"; usage ;;
  esac
}

main() {
  (($# >= 1)) || usage
  local cmd=$1
  shift
  case $cmd in
    start | stop | status)
      (($# == 1)) || usage
      set_paths "$1"
      "cmd_$cmd"
      ;;
    restart | stop-one | start-one | freeze | thaw)
      (($# == 2)) || usage
      local which
      which=$(server_arg "$1")
      set_paths "$2"
      "cmd_${cmd//-/_}" "$which"
      ;;
    -h | --help | help) usage 0 ;;
    *) log "unknown subcommand '$cmd'"; usage ;;
  esac
}

main "$@"
