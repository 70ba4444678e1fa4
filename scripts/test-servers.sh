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
#
# The code is in scripts/servers/: lib.sh (shared helpers; it also describes
# the functions every server file provides), postgres.sh (pg_*) and
# mariadb.sh (my_*). This file parses the command line and dispatches.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

SERVERS_DIR=$(dirname -- "$(realpath -- "${BASH_SOURCE[0]}")")/servers
# shellcheck source=servers/lib.sh
. "$SERVERS_DIR/lib.sh"
# shellcheck source=servers/postgres.sh
. "$SERVERS_DIR/postgres.sh"
# shellcheck source=servers/mariadb.sh
. "$SERVERS_DIR/mariadb.sh"

# server_arg NAME: set WHICH (postgres or mysql) and X, the prefix of its
# functions (pg or my), from a server NAME given on the command line.
server_arg() {
  case ${1:-} in
    postgres | postgresql | pg) WHICH=postgres X=pg ;;
    mysql | mariadb | my) WHICH=mysql X=my ;;
    *) log "expected 'postgres' or 'mysql', got '${1:-}'"; usage ;;
  esac
}

require_initialized() {
  [[ -e "$DIR/$X/.initialized" ]] || die "$WHICH server in $DIR was never started (run '$PROG start $DIR' first)"
}

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
  local t0=$SECONDS rc=0 pg_job
  lock_dir
  # Stop both in parallel: halves the wall time of the common case.
  pg_stop clean &
  pg_job=$!
  my_stop clean || rc=1
  wait "$pg_job" || rc=1
  log "servers stopped in $((SECONDS - t0))s"
  return "$rc"
}

cmd_status() {
  local rc=0
  if pg_running; then echo "postgres: running (port $(read_port "$PG_PORT_FILE"), pid $(pg_postmaster_pid))"; else echo "postgres: stopped"; rc=1; fi
  if my_running; then echo "mysql: running (port $(read_port "$MY_PORT_FILE"), pid $(my_pid))"; else echo "mysql: stopped"; rc=1; fi
  return "$rc"
}

# restart: a crash (PostgreSQL: pg_ctl -m immediate, no checkpoint; MariaDB:
# SIGKILL), then a start on the same port that runs crash recovery.
cmd_restart() {
  require_initialized
  lock_dir
  "${X}_stop" crash
  "${X}_start_one"
}

cmd_stop_one() {
  [[ -d "$DIR" ]] || { log "$DIR does not exist; nothing to stop"; return 0; }
  lock_dir
  "${X}_stop" clean
  log "$WHICH stopped"
}

cmd_start_one() {
  require_initialized
  check_socket_lengths
  lock_dir
  "${X}_start_one"
}

cmd_freeze() {
  require_initialized
  lock_dir
  # The postmaster first, so that it forks no new backend that escapes.
  # shellcheck disable=SC2046 # one pid per word
  kill -STOP $("${X}_pids")
  log "$WHICH frozen"
}

cmd_thaw() {
  require_initialized
  lock_dir
  # shellcheck disable=SC2046 # one pid per word
  kill -CONT $("${X}_pids")
  log "$WHICH thawed"
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
      server_arg "$1"
      set_paths "$2"
      "cmd_${cmd//-/_}"
      ;;
    -h | --help | help) usage 0 ;;
    *) log "unknown subcommand '$cmd'"; usage ;;
  esac
}

main "$@"
