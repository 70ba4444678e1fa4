#!/usr/bin/env bash
# THE demo command: install dependencies, build the demo in a tree of its own
# (build-demo/, or $SQLOCK_DEMO_BUILD_DIR), and run it. Extra arguments are
# passed to the demo (see examples/demo.cpp).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# Only what the demo needs (SQLite, no tests), so it never reconfigures the
# test build in build/.
BUILD_DIR=${SQLOCK_DEMO_BUILD_DIR:-build-demo}
# The demo's speed is its sleeps, not the code's, but a clean build is part of
# the first minute: -O1 and a unity build (two large translation units instead
# of fourteen, so spdlog's headers are compiled twice, not fourteen times) take
# it from ~40 s to ~12 s on two cores.
FAST=(-DCMAKE_UNITY_BUILD=ON "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG")

configure() {
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSQLOCK_BUILD_TESTS=OFF -DSQLOCK_BUILD_BENCH=OFF -DSQLOCK_BUILD_CLI=OFF \
    -DSQLOCK_WITH_POSTGRES=OFF -DSQLOCK_WITH_MYSQL=OFF "$@" >/dev/null
}
build() { cmake --build "$BUILD_DIR" -j "${SQLOCK_BUILD_JOBS:-2}" --target sqlock_demo; }

bash "$ROOT/scripts/install-deps.sh" demo
configure "${FAST[@]}"
if ! build; then
  # Sources that each define the same internal name cannot share a unity
  # translation unit; the demo must build anyway.
  echo "demo.sh: the unity build failed; building one file at a time" >&2
  configure -DCMAKE_UNITY_BUILD=OFF
  build
fi

DEMO=$BUILD_DIR/examples/sqlock_demo
if [[ ! -x "$DEMO" ]]; then
  echo "demo.sh: ERROR: the build did not produce $DEMO" >&2
  echo "demo.sh: (expected an executable target 'sqlock_demo' in examples/)" >&2
  exit 1
fi
exec "$DEMO" --db "$BUILD_DIR/sqlock-demo.db" "$@"
