#!/usr/bin/env bash
# Replicated and pooled topologies on loopback ports, for sqlock's high
# availability tests (docs/high-availability.md).
#
# Usage:
#   ha.sh start TOPOLOGY DIR     start one topology in DIR, write DIR/env (SQLOCK_TEST_HA_*)
#         replica                PostgreSQL primary + synchronous standby (sync_state = sync)
#         async-replica          the same with asynchronous streaming
#         galera                 MariaDB Galera, 3 nodes (g1 bootstraps, g2 and g3 join by rsync SST)
#         pgbouncer              PostgreSQL behind PgBouncer 1.18 in pool_mode = transaction
#   ha.sh stop DIR               stop whatever DIR runs (idempotent, bounded)
#   ha.sh status DIR
#   ha.sh failover [GAP_S] DIR   crash the primary (pg_ctl stop -m immediate), wait GAP_S seconds,
#                                clear synchronous_standby_names on the standby and promote it
#   ha.sh rejoin DIR             re-clone the crashed primary as the new primary's standby
#   ha.sh pause-standby DIR      SIGSTOP the standby's WAL receiver (resume-standby: SIGCONT)
#   ha.sh stop-standby DIR       crash the standby (failover starts it again, behind the primary)
#   ha.sh kill-node N DIR        SIGKILL Galera node N (1-3); restart-node N DIR starts it again
#   ha.sh smoke TOPOLOGY... [--full] [--build-dir DIR]
#                                start each topology in a temp dir, run its tests (tests/ha_test.cpp,
#                                and the contract suite through PgBouncer), stop it. TOPOLOGY:
#                                replica (with async-replica), galera, pgbouncer or all.
#                                --full: the longer runs.
#                                Exits 77 when a topology cannot run here (not root, no Galera).
#
# The servers are scripts/servers/*.sh servers (as scripts/test-servers.sh
# starts them) in DIR/n1, DIR/n2 (PostgreSQL nodes), DIR/g1..g3 (Galera
# nodes), DIR/b and DIR/bouncer (PgBouncer and its server).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVERS_DIR=$ROOT/scripts/servers
# shellcheck source=servers/lib.sh
. "$SERVERS_DIR/lib.sh"
# shellcheck source=servers/postgres.sh
. "$SERVERS_DIR/postgres.sh"
# shellcheck source=servers/mariadb.sh
. "$SERVERS_DIR/mariadb.sh"
# shellcheck source=servers/replica.sh
. "$SERVERS_DIR/replica.sh"
# shellcheck source=servers/galera.sh
. "$SERVERS_DIR/galera.sh"
# shellcheck source=servers/pgbouncer.sh
. "$SERVERS_DIR/pgbouncer.sh"

usage() { # the text at the top of this file
  sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit "${1:-2}"
}

# ha_env_add NAME VALUE: set NAME in HA/env (replacing an older value).
ha_env_add() {
  local tmp=$HA/env.tmp
  { grep -v "^$1=" "$HA/env" 2>/dev/null || true; printf '%s=%q\n' "$1" "$2"; } >"$tmp"
  chmod 0644 "$tmp"
  mv -f "$tmp" "$HA/env"
}

ha_dir() { # ha_dir DIR: set HA (absolute) and take DIR's lock
  HA=$(realpath -m -- "$1")
  mkdir -p "$HA"
  chmod 0711 "$HA"
  local saved=${DIR:-}
  DIR=$HA
  lock_dir
  DIR=$saved
}

cmd_start() {
  local topology=$1 t0
  t0=$(date +%s%N)
  [[ ! -s "$HA/topology" ]] || die "$HA already runs $(<"$HA/topology"); stop it first"
  case $topology in
    replica) RP_SYNC=1; rp_start ;;
    async-replica) RP_SYNC=0; rp_start ;;
    galera) gl_start ;;
    pgbouncer) pb_start ;;
    *) log "unknown topology '$topology'"; usage ;;
  esac
  echo "$topology" >"$HA/topology"
  ha_env_add SQLOCK_TEST_HA_DIR "$HA"
  ha_env_add SQLOCK_TEST_HA_SCRIPT "$ROOT/scripts/ha.sh"
  log "$topology started in $((($(date +%s%N) - t0) / 1000000))ms; memory $(ha_memory); $HA/env:"
  cat "$HA/env"
}

# ha_memory: the resident memory (PSS where readable) of every server process DIR runs.
ha_memory() {
  local pid total=0 kb
  for pid in $(ha_pids); do
    kb=$(awk '/^Pss:/ { print $2; exit }' "/proc/$pid/smaps_rollup" 2>/dev/null ||
      awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || echo 0)
    total=$((total + ${kb:-0}))
  done
  echo "$((total / 1024)) MB PSS in $(ha_pids | wc -w) processes"
}

# ha_pids: the server processes whose working directory or command line is under HA.
ha_pids() {
  local p
  for p in /proc/[0-9]*; do
    if [[ "$(readlink "$p/cwd" 2>/dev/null)" == "$HA"/* ]] || tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "$HA/"; then
      pid_alive "${p#/proc/}" && echo "${p#/proc/}"
    fi
  done
}

cmd_stop() {
  [[ -d "$HA" ]] || return 0
  local t0=$SECONDS
  rp_stop
  gl_stop
  pb_stop
  rm -f "$HA/topology"
  log "stopped in $((SECONDS - t0))s"
}

cmd_status() {
  echo "topology: $(cat "$HA/topology" 2>/dev/null || echo none)"
  rp_status
  gl_status
  pb_status
}

# ---------------------------------------------------------------------------
# smoke: what ctest runs (tests/CMakeLists.txt, ha.*)
# ---------------------------------------------------------------------------

SMOKE_DIR=
smoke_cleanup() {
  [[ -n "$SMOKE_DIR" ]] || return 0
  bash "$ROOT/scripts/ha.sh" stop "$SMOKE_DIR" >/dev/null 2>&1 || true
  [[ "${SQLOCK_KEEP_TMP:-0}" == 1 ]] && { log "keeping $SMOKE_DIR"; return 0; }
  rm -rf "$SMOKE_DIR"
}

# smoke_one TOPOLOGY TESTS FULL: start TOPOLOGY, run the test binary, stop.
smoke_one() {
  local topology=$1 tests=$2 full=$3 rc=0 filter
  SMOKE_DIR=$(mktemp -d /tmp/sqha.XXXXXX)
  chmod 0711 "$SMOKE_DIR"
  trap smoke_cleanup EXIT
  bash "$ROOT/scripts/ha.sh" start "$topology" "$SMOKE_DIR" || { smoke_cleanup; SMOKE_DIR=; return 1; }
  (
    set -a
    # shellcheck source=/dev/null
    . "$SMOKE_DIR/env"
    set +a
    export SQLOCK_TEST_HA_FULL=$full
    case $topology in
      replica) filter='replica-sync:*' ;;
      async-replica) filter='replica-async:*' ;;
      galera) filter='*Galera*' ;;
      pgbouncer) filter='*PgBouncer*' ;;
    esac
    "$tests" --test-suite=ha "--test-case=$filter" --duration=true || exit 1
    if [[ $topology == pgbouncer ]]; then
      # The contract, watchdog, fair-waiting, job and event suites, through
      # PgBouncer in transaction pooling mode; not the cases that test what
      # the pool takes away by design: PostgreSQL's LISTEN wake-ups (waiters
      # poll through a pool), the statement counts of a renewal tick and of
      # a lock + unlock (a pooled transaction adds BEGIN and its SET LOCALs),
      # select_for_update's (refused through the pool, as the ha suite
      # checks), and the unix-socket URL form (this PgBouncer listens on TCP
      # only).
      SQLOCK_TEST_POSTGRES_URL=$SQLOCK_TEST_HA_PGBOUNCER_URL \
        "$tests" --test-suite=contract,watchdog,fair,jobs,events '--test-case=*<postgres>*' \
        '--test-case-exclude=*unix-socket URL forms*,*release wakes the head waiter*,*release rings the lock*,*a ring that comes while*,the wake-up listener*,renewal is batched*,an uncontended lock and unlock cost*,an uncontended select_for_update lock*,a waiter in another process is granted at the ring*' ||
        exit 1
    fi
  ) || rc=1
  smoke_cleanup
  SMOKE_DIR=
  trap - EXIT
  return "$rc"
}

cmd_smoke() {
  local build=$ROOT/build full=0 topologies=() t rc=0 t0
  while (($#)); do
    case $1 in
      --full) full=1 ;;
      --build-dir) build=$2; shift ;;
      all) topologies+=(replica async-replica pgbouncer galera) ;;
      replica) topologies+=(replica async-replica) ;;
      galera | pgbouncer) topologies+=("$1") ;;
      *) log "smoke: unknown argument '$1'"; usage ;;
    esac
    shift
  done
  ((${#topologies[@]})) || usage
  local tests=$build/tests/sqlock_tests
  [[ -x "$tests" ]] || die "$tests not built (cmake --build $build)"
  if ((!IS_ROOT)); then
    # PostgreSQL and PgBouncer refuse root, Galera's rsync SST needs its own
    # user: as root the scripts switch users, elsewhere they cannot.
    log "SKIP: the HA topologies switch to the postgres and mysql users, which needs root"
    exit 77
  fi
  for t in "${topologies[@]}"; do
    if [[ $t == galera ]] && ! gl_available; then
      log "SKIP galera: $GL_PROVIDER or rsync is missing (scripts/install-deps.sh installs galera-4 and rsync)"
      ((${#topologies[@]} == 1)) && exit 77
      continue
    fi
    if [[ $t == pgbouncer ]] && ! command -v pgbouncer >/dev/null && [[ ! -x /usr/sbin/pgbouncer ]]; then
      log "SKIP pgbouncer: not installed (scripts/install-deps.sh installs it)"
      ((${#topologies[@]} == 1)) && exit 77
      continue
    fi
    t0=$SECONDS
    if smoke_one "$t" "$tests" "$full"; then
      log "smoke $t: PASS ($((SECONDS - t0))s)"
    else
      log "smoke $t: FAIL ($((SECONDS - t0))s)"
      rc=1
    fi
  done
  return "$rc"
}

main() {
  (($# >= 1)) || usage
  local cmd=$1
  shift
  case $cmd in
    start) (($# == 2)) || usage; ha_dir "$2"; cmd_start "$1" ;;
    stop | status) (($# == 1)) || usage; ha_dir "$1"; "cmd_$cmd" ;;
    failover) (($# == 1 || $# == 2)) || usage; ha_dir "${!#}"; rp_failover "$( (($# == 2)) && echo "$1" || echo 0)" ;;
    rejoin) (($# == 1)) || usage; ha_dir "$1"; rp_rejoin ;;
    pause-standby) (($# == 1)) || usage; ha_dir "$1"; rp_pause_standby ;;
    stop-standby) (($# == 1)) || usage; ha_dir "$1"; rp_stop_standby ;;
    resume-standby) (($# == 1)) || usage; ha_dir "$1"; rp_resume_standby ;;
    kill-node) (($# == 2)) || usage; ha_dir "$2"; gl_kill "$(gl_node_arg "$1")" ;;
    restart-node) (($# == 2)) || usage; ha_dir "$2"; gl_restart "$(gl_node_arg "$1")" ;;
    smoke) cmd_smoke "$@" ;;
    -h | --help | help) usage 0 ;;
    *) log "unknown subcommand '$cmd'"; usage ;;
  esac
}

main "$@"
