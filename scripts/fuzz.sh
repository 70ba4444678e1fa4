#!/usr/bin/env bash
# Fuzz sqlock with libFuzzer (tests/fuzz: one <name>_fuzz.cpp per target, its
# seed corpus in tests/fuzz/corpus/<name>/):
#
#   url       URL parsing, redaction and scrubbing never show a password
#   duration  the command line's durations: the documented grammar, round trips, no UB
#   key       lock keys, prefixes, job names, run keys: the documented limits
#   cli       `sqlock`'s argv (split on NUL bytes): accepted, or a usage error (64)
#
#   scripts/fuzz.sh                  every target for 60 s
#   scripts/fuzz.sh --seconds 6      briefly (CI: the ctest test fuzz.short)
#
# Options:
#   --seconds N        how long each target runs (default 60)
#   --targets "a b"    only these targets (default: url duration key cli)
#   --build-dir DIR    where the fuzzers are built, with clang (default: build-fuzz)
#   --update-corpus    merge the inputs a run found that add coverage into
#                      tests/fuzz/corpus/<name>/ (otherwise the repository is not touched)
#
# One command: it installs what it needs (scripts/install-deps.sh fuzz),
# configures DIR with clang and -DSQLOCK_BUILD_FUZZERS=ON, builds the targets,
# and runs each one on a copy of its corpus (DIR/fuzz/work/<name>). It prints,
# per target, the executions and whether it crashed; a crashing input (or one
# that hangs, leaks or runs out of memory) is saved as
# DIR/fuzz/artifacts/<name>-crash-<sha1> (-timeout-, -leak-, -oom-), and
# `DIR/tests/fuzz/<name>_fuzz FILE` replays it. Exit status 0 when no target
# crashed, 1 when one did, 64 for bad usage.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALL_TARGETS="url duration key cli"
say() { printf '==> fuzz.sh: %s\n' "$*" >&2; }
usage_error() { echo "fuzz.sh: $* (see --help)" >&2; exit 64; }

SECONDS_EACH=60 TARGETS=$ALL_TARGETS BUILD_DIR=$ROOT/build-fuzz UPDATE=0
while (($#)); do
  case $1 in
    --seconds | --targets | --build-dir)
      (($# >= 2)) || usage_error "$1 needs a value"
      case $1 in
        --seconds) SECONDS_EACH=$2 ;;
        --targets) TARGETS=$2 ;;
        --build-dir) BUILD_DIR=$(realpath -m "$2") ;;
      esac
      shift ;;
    --update-corpus) UPDATE=1 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) usage_error "unknown option '$1'" ;;
  esac
  shift
done
[[ "$SECONDS_EACH" =~ ^[1-9][0-9]{0,5}$ ]] || usage_error "--seconds takes a whole number of seconds, at least 1"
[[ -n "${TARGETS// /}" ]] || usage_error "--targets names no target"
for t in $TARGETS; do [[ " $ALL_TARGETS " == *" $t "* ]] || usage_error "unknown target '$t' (of: $ALL_TARGETS)"; done

bash "$ROOT/scripts/install-deps.sh" fuzz >&2
say "building the fuzzers in $BUILD_DIR"
# A library with only what the targets reach: no server backends, no tests.
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE= -DSQLOCK_BUILD_FUZZERS=ON \
  -DSQLOCK_BUILD_TESTS=OFF -DSQLOCK_BUILD_EXAMPLES=OFF -DSQLOCK_BUILD_BENCH=OFF -DSQLOCK_BUILD_CLI=OFF \
  -DSQLOCK_WITH_POSTGRES=OFF -DSQLOCK_WITH_MYSQL=OFF >/dev/null
build_targets=()
for t in $TARGETS; do build_targets+=("${t}_fuzz"); done
cmake --build "$BUILD_DIR" -j "${SQLOCK_BUILD_JOBS:-2}" --target "${build_targets[@]}" >&2

WORK=$BUILD_DIR/fuzz/work
ARTIFACTS=$BUILD_DIR/fuzz/artifacts
mkdir -p "$WORK" "$ARTIFACTS"
crashed=()
for t in $TARGETS; do
  fuzzer=$BUILD_DIR/tests/fuzz/${t}_fuzz
  corpus=$WORK/$t
  log=$WORK/$t.log
  rm -rf "$corpus"
  mkdir -p "$corpus"
  cp -R "$ROOT/tests/fuzz/corpus/$t/." "$corpus/"
  say "$t: fuzzing for ${SECONDS_EACH}s (log: $log)"
  rc=0
  # -close_fd_mask=1: the targets' stdout (sqlock --help) is noise; their
  # findings and libFuzzer's reports go to stderr.
  "$fuzzer" -max_total_time="$SECONDS_EACH" -timeout=10 -max_len=512 -close_fd_mask=1 -print_final_stats=1 \
    -artifact_prefix="$ARTIFACTS/$t-" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if ((rc == 0)); then
    printf '%-9s %12s executions  no crash\n' "$t" "${execs:-?}"
  else
    crashed+=("$t")
    input=$(sed -n 's/.*Test unit written to //p' "$log" | tail -1)
    printf '%-9s %12s executions  CRASHED (exit %d): %s\n' "$t" "${execs:-?}" "$rc" "${input:-no input saved}"
    # What the target or the sanitizer said, and the input.
    grep -E -A6 '_fuzz: |ERROR: |runtime error|SUMMARY' "$log" | head -40 >&2 || tail -20 "$log" >&2
  fi
  if ((UPDATE)); then
    before=$(find "$ROOT/tests/fuzz/corpus/$t" -type f | wc -l)
    "$fuzzer" -merge=1 -timeout=10 -max_len=512 -close_fd_mask=1 "$ROOT/tests/fuzz/corpus/$t" "$corpus" \
      >"$WORK/$t.merge.log" 2>&1 || { echo "fuzz.sh: merging $t failed (see $WORK/$t.merge.log)" >&2; exit 1; }
    after=$(find "$ROOT/tests/fuzz/corpus/$t" -type f | wc -l)
    say "$t: $((after - before)) new input(s) merged into tests/fuzz/corpus/$t"
  fi
done

if ((${#crashed[@]})); then
  say "crashed: ${crashed[*]} (inputs in $ARTIFACTS)"
  exit 1
fi
say "no crash in: $TARGETS"
