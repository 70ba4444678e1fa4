# shellcheck shell=bash disable=SC2034 # its variables are used by the files sourced after it
# Shared helpers of scripts/test-servers.sh (sourced, never run): settings,
# logging, process and port helpers, the locks, DIR's layout, the start
# sequence both servers share, and the env file.
#
# Each server file (postgres.sh: pg_*, mariadb.sh: my_*) provides
#   X_init              create the server's directory and data from scratch
#   X_launch PORT       start it on PORT, wait until it accepts connections;
#                       returns 3 if the port was taken, 1 on other failures
#   X_setup             create the test database and accounts
#   X_running           our server is up
#   X_start_one         start it (start_server below does the work)
#   X_stop clean|crash  bounded, idempotent stop (crash: no clean shutdown)
#   X_pids              its processes, the main one first (for freeze/thaw)
# where X (pg or my) is also the name of its subdirectory of DIR.

readonly PROG=${0##*/}
readonly DB_NAME=sqlock_test
readonly APP_USER=sqlock
readonly APP_PASSWORD=s3cr3t-pw
readonly READY_TIMEOUT=30     # seconds to wait for a server to accept connections
readonly STOP_TIMEOUT=30      # seconds to wait for a server process to go away
readonly PORT_LOCK=/tmp/sqlock-test-servers-ports.lock

log() { printf '%s: %s\n' "$PROG" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

usage() { # usage [EXIT_CODE]: print lines 2-16 of test-servers.sh (its usage text)
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}

IS_ROOT=0
[[ "$(id -u)" -eq 0 ]] && IS_ROOT=1

# SQLOCK_SERVERS_DURABLE=1 (read when a server directory is first
# initialised): production durability, every commit flushed to disk, for the
# benchmarks (scripts/bench.sh). The default skips fsync: the tests' data is
# throwaway, and a killed server process still loses nothing because written
# pages stay in the OS page cache. pg_durability_settings and
# my_durability_settings turn DURABLE into server settings.
DURABLE=0
[[ "${SQLOCK_SERVERS_DURABLE:-0}" == 1 ]] && DURABLE=1

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
# Ports and locks
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
# Paths (the layout of DIR is documented at the top of test-servers.sh)
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
# Starting a server
# ---------------------------------------------------------------------------

# start_server NAME X: start server X (pg or my; NAME for messages) unless it
# is running. One started before is launched again on its saved port. The
# first time, X_init creates it and it is launched on a free port picked
# under the port lock (another port if something else grabbed that one
# first), then X_setup creates the database and accounts.
start_server() {
  local name=$1 x=$2 port_file=$DIR/$2/port port rc attempt
  if "${x}_running"; then
    log "$name already running on port $(read_port "$port_file" || echo '?')"
    return 0
  fi
  if [[ -e "$DIR/$x/.initialized" ]] && port=$(read_port "$port_file"); then
    "${x}_launch" "$port" || { rc=$?; ((rc == 3)) && log "port $port is taken by another process"; die "$name failed to start on port $port"; }
    return 0
  fi
  "${x}_init"
  for attempt in 1 2 3 4 5; do
    lock_ports
    port=$(pick_port)
    echo "$port" >"$port_file"
    rc=0
    "${x}_launch" "$port" || rc=$?
    unlock_ports
    ((rc == 3)) && { log "port $port was taken; retrying (attempt $attempt)"; continue; }
    ((rc == 0)) || die "$name failed to start"
    "${x}_setup" || die "$name setup (database and account creation) failed"
    touch "$DIR/$x/.initialized"
    return 0
  done
  die "$name: no free port after 5 attempts"
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
