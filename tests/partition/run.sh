#!/usr/bin/env bash
# Runs the test suite's "partition" cases inside a private network namespace,
# against PostgreSQL and MariaDB servers of their own started inside it, where
# nftables can drop the servers' packets without touching the machine's
# network. Needs root (unshare -n, nft); elsewhere it skips (exit 77) with a
# message saying why.
#
#   tests/partition/run.sh SQLOCK_TESTS TEST_SERVERS_SH [DOCTEST_ARGS...]
set -euo pipefail

if [[ "${1:-}" != --inside ]]; then
  (($# >= 2)) || { echo "usage: $0 SQLOCK_TESTS TEST_SERVERS_SH [DOCTEST_ARGS...]" >&2; exit 64; }
  skip() { echo "SKIPPED: $* (the partition tests need it)"; exit 77; }
  [[ "$(id -u)" -eq 0 ]] || skip "not root: network namespaces and nftables need root"
  command -v nft >/dev/null || skip "nft is not installed (Debian package nftables; scripts/install-deps.sh installs it)"
  command -v unshare >/dev/null || skip "unshare is not installed"
  unshare -n true 2>/dev/null || skip "this machine does not allow a private network namespace"
  exec unshare -n -- bash "$0" --inside "$@"
fi
shift
TESTS=$1
SERVERS=$2
shift 2

ip link set lo up
# A short path under /tmp (unix socket paths stay below 107 bytes); the
# PostgreSQL server runs as postgres and must be able to traverse it.
TMP=$(mktemp -d /tmp/sqlp.XXXXXX)
chmod 0711 "$TMP"
cleanup() {
  local rc=$?
  nft delete table inet sqlock_partition 2>/dev/null || true
  bash "$SERVERS" stop "$TMP/s" >/dev/null 2>&1 || true
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bash "$SERVERS" start "$TMP/s" >"$TMP/servers.log" 2>&1 || { cat "$TMP/servers.log" >&2; exit 1; }
set -a
# shellcheck source=/dev/null
. "$TMP/s/env"
set +a
export SQLOCK_TEST_SERVERS_SCRIPT=$SERVERS SQLOCK_TEST_NETNS=1
"$TESTS" --test-suite=partition --duration=true "$@"
