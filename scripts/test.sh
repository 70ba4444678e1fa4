#!/usr/bin/env bash
# THE test command: install dependencies, start throwaway PostgreSQL + MariaDB
# servers, build with warnings-as-errors, run the whole ctest suite against
# them, and always tear the servers down again.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -L sqlite       # extra arguments go to ctest
#   SQLOCK_SANITIZE=1 scripts/test.sh   # also an ASan+UBSan build (default when CI=true)
#
# Environment knobs:
#   SQLOCK_BUILD_DIR        build directory            (default: build)
#   SQLOCK_ASAN_BUILD_DIR   sanitizer build directory  (default: build-asan)
#   SQLOCK_BUILD_JOBS       parallel compile jobs      (default: 2)
#   SQLOCK_TEST_JOBS        parallel ctest jobs        (default: 3: the tests mostly
#                                                       wait on leases and servers)
#   SQLOCK_TEST_TIMEOUT     per-test timeout, seconds  (default: 600)
#   SQLOCK_SANITIZE=1 / CI=true   also run the sanitizer suite
#   SQLOCK_KEEP_TMP=1       keep the server directory (logs, data) after the run
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

SERVERS=$ROOT/scripts/test-servers.sh
BUILD_DIR=${SQLOCK_BUILD_DIR:-build}
ASAN_BUILD_DIR=${SQLOCK_ASAN_BUILD_DIR:-build-asan}
BUILD_JOBS=${SQLOCK_BUILD_JOBS:-2}
TEST_JOBS=${SQLOCK_TEST_JOBS:-3}
TEST_TIMEOUT=${SQLOCK_TEST_TIMEOUT:-600}

SANITIZE=0
case "${SQLOCK_SANITIZE:-0}" in 1 | true | yes | ON | on) SANITIZE=1 ;; esac
case "${CI:-}" in true | 1 | yes) SANITIZE=1 ;; esac

say() { printf '\n==> test.sh: %s\n' "$*"; }
START=$SECONDS
# Stage results for the summary line printed on exit (also after a failure).
RESULT_MAIN="not-run"
RESULT_ASAN=$( ((SANITIZE)) && echo not-run || echo skipped)
FAILED=0

bash "$ROOT/scripts/install-deps.sh"

# Short path under /tmp: unix socket paths must stay below 107 bytes.
TMP=$(mktemp -d /tmp/sqlt.XXXXXX)
# mktemp makes it 0700; as root the PostgreSQL server runs as user postgres
# and must be able to traverse it (traverse only: no listing).
chmod 0711 "$TMP"
SERVER_DIRS=()

# Long steps (build, ctest) run through `interruptible`: in the background
# plus `wait`, because bash postpones traps until a *foreground* command
# finishes, so a SIGTERM from a CI runner would otherwise only be handled
# after the whole build or test suite. Job control (set -m) is switched on
# just for the launch so that the step gets its own process group (cleanup
# can then kill compilers / test processes as one group) and so that bash
# does NOT make it ignore SIGINT/SIGQUIT (which it does for background jobs
# without job control, and which would silently break tests of signal
# handling). stdin is /dev/null: a background group must not read the tty.
CHILD=
interruptible() {
  local rc=0
  set -m
  "$@" </dev/null &
  CHILD=$!
  set +m
  wait "$CHILD" || rc=$?
  CHILD=
  return "$rc"
}

# stop_child: SIGTERM the running step's process group, SIGKILL after 10 s.
# Servers started by tests are not in it (they run in their own sessions) and
# are stopped by test-servers.sh in cleanup.
# shellcheck disable=SC2317 # invoked via trap
stop_child() {
  local pgid=$CHILD i
  echo "test.sh: interrupted; stopping process group $pgid" >&2
  kill -TERM -- "-$pgid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    # Members that are only zombies count as gone (kill -0 would still
    # succeed for them).
    ps -eo pgid=,stat= | awk -v g="$pgid" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }' || break
    sleep 0.1
  done
  kill -KILL -- "-$pgid" 2>/dev/null || true
  wait "$pgid" 2>/dev/null || true
}

# Always stop every server we started and remove the temp dir, whatever
# happened (test failure, build error, Ctrl-C). On failure show the tail of
# the server logs first: they are gone afterwards.
# shellcheck disable=SC2317 # invoked via trap
cleanup() {
  local rc=$? d f
  trap - EXIT INT TERM
  [[ -z "$CHILD" ]] || stop_child
  for d in "${SERVER_DIRS[@]}"; do
    if ((rc != 0)); then
      for f in "$d/pg/postgres.log" "$d/my/error.log"; do
        [[ -s "$f" ]] || continue
        echo "---- last lines of $f ----" >&2
        tail -n 20 "$f" >&2 || true
      done
    fi
    "$SERVERS" stop "$d" || echo "test.sh: WARNING: stopping servers in $d failed" >&2
  done
  if [[ "${SQLOCK_KEEP_TMP:-0}" == 1 ]]; then
    echo "test.sh: keeping $TMP (SQLOCK_KEEP_TMP=1)" >&2
  else
    rm -rf "$TMP"
  fi
  echo
  echo "test.sh: SUMMARY: $([[ $rc == 0 ]] && echo OK || echo FAILED):" \
    "tests=$RESULT_MAIN sanitizers=$RESULT_ASAN ($((SECONDS - START))s)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Tests restart/stop servers through this script (fencing across restarts,
# "database disappears mid-operation").
export SQLOCK_TEST_SERVERS_SCRIPT=$SERVERS

# start_servers NAME: fresh servers in $TMP/NAME, exported into our env (and
# thereby into cmake, ctest and every test process).
start_servers() {
  local dir=$TMP/$1
  SERVER_DIRS+=("$dir")
  say "starting test servers in $dir"
  "$SERVERS" start "$dir"
  set -a
  # shellcheck source=/dev/null
  . "$dir/env"
  set +a
}

# build DIR EXTRA_CMAKE_ARGS...: configure + build (fatal on failure).
build() {
  local dir=$1
  shift
  say "configuring $dir"
  # -g1 (line tables: enough for sanitizer and crash stack traces) instead of
  # -g builds the suite in markedly less time.
  interruptible cmake -S "$ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSQLOCK_WERROR=ON \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "$@"
  say "building $dir (-j$BUILD_JOBS)"
  interruptible cmake --build "$dir" -j "$BUILD_JOBS"
}

# run_ctest DIR ARGS...: run the suite; returns ctest's exit status.
# --no-tests=error: a build that registered no tests must not look green.
run_ctest() {
  local dir=$1
  shift
  say "running tests in $dir (-j$TEST_JOBS, timeout ${TEST_TIMEOUT}s) $*"
  interruptible ctest --test-dir "$dir" --output-on-failure --no-tests=error \
    -j "$TEST_JOBS" --timeout "$TEST_TIMEOUT" "$@"
}


# ---- regular build -------------------------------------------------------
RESULT_MAIN="setup-FAILED"
start_servers main
RESULT_MAIN="build-FAILED"
build "$BUILD_DIR"
if run_ctest "$BUILD_DIR" "$@"; then RESULT_MAIN=PASS; else RESULT_MAIN=FAIL; FAILED=1; fi

# ---- sanitizer build -----------------------------------------------------
if ((SANITIZE)); then
  # Fresh servers, so the second suite does not see the first suite's leftovers.
  "$SERVERS" stop "$TMP/main"
  RESULT_ASAN="setup-FAILED"
  start_servers asan
  RESULT_ASAN="build-FAILED"
  # -O1: sanitizer builds at -O2 compile slowly for little gain in run time.
  build "$ASAN_BUILD_DIR" -DSQLOCK_SANITIZE=ON -DSQLOCK_BUILD_BENCH=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1"
  # Sanitizer settings apply only to this suite (the subshell keeps them local).
  if (
    export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
    export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
    # Optional leak suppressions for third-party libraries.
    if [[ -z "${LSAN_OPTIONS:-}" && -f "$ROOT/tests/lsan.supp" ]]; then
      export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
    fi
    # Not the package test: it checks install and find_package by building
    # the library again, which sanitizers add nothing to (and it took ~4 min).
    # Not the fault campaign either, nor the fault and partition suites: they
    # judge timing-driven histories (servers restarted, frozen or cut off
    # under running leases), which a sanitizer's slowdown distorts; the
    # regular build runs them. Nor the
    # fuzzers: they are built with sanitizers already, in a tree of their own.
    # Nor what runs no library code of its own worth sanitizing twice, to keep
    # the suite's time: the .deb build, the benchmark's smoke run (the
    # library paths it takes are the suites'), and the Galera smoke (mostly
    # three servers starting; the library's Galera paths are the MariaDB
    # dialect's). Nor the other HA smokes (servers failing over and a pooler;
    # their library paths are the dialects' that the suites here sanitize), nor
    # the CLI suites on the two servers: the program's code is sanitized by
    # cli.sqlite, and its database paths by the library suites on every backend.
    run_ctest "$ASAN_BUILD_DIR" \
      -E '^(package|package\.deb|campaign|fault\..*|partition|fuzz\.short|bench\.smoke|ha\..*|cli\.(postgres|mysql))$' "$@"
  ); then
    RESULT_ASAN=PASS
  else
    RESULT_ASAN=FAIL
    FAILED=1
  fi
fi

exit "$FAILED"   # the EXIT trap stops the servers and prints the summary
