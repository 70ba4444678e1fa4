# shellcheck shell=bash
# MariaDB for scripts/test-servers.sh (sourced after lib.sh): the my_*
# functions (the interface is described at the top of lib.sh). mariadbd runs
# as the invoking user (root included), detached with setsid, its pid in
# DIR/my/mariadbd.pid.

# Extra mariadbd arguments for the next my_launch (scripts/ha.sh bootstraps a
# Galera cluster with --wsrep-new-cluster).
MY_LAUNCH_ARGS=()

my_admin() { # my_admin ARGS...: mariadb-admin as root over the unix socket
  timeout 20 mariadb-admin --no-defaults --protocol=socket -S "$MY_SOCK" -uroot "$@"
}
my_sql() { # my_sql [CLIENT_ARGS...] < SQL: run SQL as root over the unix socket
  timeout 60 mariadb --no-defaults --protocol=socket -S "$MY_SOCK" -uroot "$@"
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

my_pid() {
  [[ -s "$MY_PID_FILE" ]] || return 1
  head -n1 "$MY_PID_FILE"
}

my_running() {
  local pid
  pid=$(my_pid) || return 1
  pid_matches "$pid" "$MY_CNF"
}

my_pids() { # my_pids: mariadbd is a single process
  local pid
  if ! pid=$(my_pid) || ! pid_matches "$pid" "$MY_CNF"; then
    die "MariaDB in $DIR is not running"
  fi
  echo "$pid"
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
    "$mariadbd" --defaults-file="$MY_CNF" --port="$port" --innodb-fast-shutdown=2 "${MY_LAUNCH_ARGS[@]}" \
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

# Runs under `|| die`, where set -e is off: every step's status is checked.
my_setup() {
  # root has an empty password (--auth-root-authentication-method=normal).
  # With skip-name-resolve a TCP connection from 127.0.0.1 only matches
  # 'root'@'127.0.0.1', so make sure that account exists without a password.
  # The sqlock account has a real password so tests can prove it never leaks.
  my_sql <<EOF || return 1
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
  local u users
  users=$(echo "SELECT CONCAT(QUOTE(User),'@',QUOTE(Host)) FROM mysql.user
                WHERE Host NOT IN ('localhost','127.0.0.1','::1','%');" | my_sql -N) || return 1
  for u in $users; do
    echo "DROP USER IF EXISTS $u;" | my_sql || return 1
  done
  return 0
}

my_start_one() { start_server MariaDB my; }

# my_stop clean|crash: clean = SIGTERM (normal shutdown), SIGKILL if it hangs;
# crash = SIGKILL right away. Bounded, idempotent.
my_stop() {
  local how=$1 pid
  pid=$(my_pid) || return 0
  my_running || return 0
  if [[ "$how" == crash ]]; then
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
