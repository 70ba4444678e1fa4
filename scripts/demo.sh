#!/usr/bin/env bash
# THE demo command: install dependencies, build a Release tree in build/ (or
# $SQLOCK_BUILD_DIR), and run the sqlock demo program. Extra arguments are
# passed to the demo.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# A tree of its own, with only what the demo needs, so that it builds in
# seconds and never reconfigures the test build in build/.
BUILD_DIR=${SQLOCK_DEMO_BUILD_DIR:-build-demo}

bash "$ROOT/scripts/install-deps.sh"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DSQLOCK_BUILD_TESTS=OFF -DSQLOCK_BUILD_BENCH=OFF \
  -DSQLOCK_WITH_POSTGRES=OFF -DSQLOCK_WITH_MYSQL=OFF >/dev/null
cmake --build "$BUILD_DIR" -j "${SQLOCK_BUILD_JOBS:-2}" --target sqlock_demo

DEMO=$BUILD_DIR/examples/sqlock_demo
if [[ ! -x "$DEMO" ]]; then
  echo "demo.sh: ERROR: the build did not produce $DEMO" >&2
  echo "demo.sh: (expected an executable target 'sqlock_demo' in examples/)" >&2
  exit 1
fi
exec "$DEMO" --db "$BUILD_DIR/sqlock-demo.db" "$@"
