#!/usr/bin/env bash
# THE demo command: install dependencies, build a Release tree in build/ (or
# $SQLOCK_BUILD_DIR), and run the sqlock demo program. Extra arguments are
# passed to the demo.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BUILD_DIR=${SQLOCK_BUILD_DIR:-build}

bash "$ROOT/scripts/install-deps.sh"
cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "${SQLOCK_BUILD_JOBS:-2}"

DEMO=$BUILD_DIR/examples/sqlock_demo
if [[ ! -x "$DEMO" ]]; then
  echo "demo.sh: ERROR: the build did not produce $DEMO" >&2
  echo "demo.sh: (expected an executable target 'sqlock_demo' in examples/)" >&2
  exit 1
fi
exec "$DEMO" "$@"
