#!/usr/bin/env bash
# Install the Debian 12 packages one use of sqlock needs, and nothing more:
#
#   scripts/install-deps.sh demo     build the library and run the SQLite demo
#   scripts/install-deps.sh [test]   build everything and run the whole suite
#                                    (the default): both database servers,
#                                    the test helpers, the packaging tools
#   scripts/install-deps.sh bench    test, plus what scripts/bench.sh needs
#                                    (Redis, hiredis, gnuplot); --bench too
#   scripts/install-deps.sh fuzz     build and run the fuzzers (scripts/fuzz.sh):
#                                    clang and libFuzzer
#
# Several sets may be named at once.
#
# - Idempotent: if every package is already installed (checked with
#   dpkg-query) we exit immediately, so scripts/test.sh and scripts/demo.sh can
#   call this on every run at almost no cost.
# - Non-interactive: DEBIAN_FRONTEND=noninteractive, one `apt-get update`,
#   then `apt-get install -y --no-install-recommends`, each waiting up to 10
#   minutes for a dpkg lock another apt holds.
# - Needs root only when something is actually missing; as a normal user with
#   everything present it succeeds, otherwise it says clearly what is missing.
# - Installing postgresql / mariadb-server must not leave system services
#   running (the tests start their own throwaway servers on private ports, so a
#   running system server would not collide, but it would waste memory and
#   could confuse whoever looks at `ps`). We install a temporary policy-rc.d
#   that forbids starting services if the machine does not already have one.
set -euo pipefail

# The library and the demo: a compiler, CMake, and the SQLite backend.
DEMO=(build-essential cmake pkg-config ca-certificates libsqlite3-dev libspdlog-dev)
# clang and libFuzzer; the sanitizer and libFuzzer runtimes clang links are in
# libclang-rt-14-dev, which clang only recommends.
FUZZER=(clang libfuzzer-14-dev libclang-rt-14-dev)
# scripts/fuzz.sh: the fuzzers, the command line's libraries (the cli target
# parses argv as sqlock does), and libpq (the url target asks it how it reads
# the URLs sqlock hands it).
FUZZ=("${DEMO[@]}" "${FUZZER[@]}" libcli11-dev nlohmann-json3-dev libpq-dev)
TEST=(
  "${DEMO[@]}" git
  # the fuzzers, which the suite runs briefly (fuzz.short)
  "${FUZZER[@]}"
  # the other backends' drivers, the test framework, the command line's libraries
  libpqxx-dev libmysqlcppconn-dev doctest-dev libcli11-dev nlohmann-json3-dev
  # database servers the integration tests run throwaway instances of
  postgresql mariadb-server
  # the replicated and pooled topologies of scripts/ha.sh: MariaDB Galera (its
  # rsync state transfer; socat for its other methods) and PgBouncer
  galera-4 rsync socat pgbouncer
  # test helpers: clock skew (faketime), process inspection (ps), ports and
  # network namespaces (ss, ip, from iproute2), dropped packets (nftables),
  # rendering the man page (groff), making the .deb packages (dpkg-dev, file)
  faketime procps iproute2 nftables groff-base dpkg-dev file
)
# scripts/bench.sh: the benchmarks' Redis server and client library, and
# gnuplot for the charts.
BENCH=("${TEST[@]}" redis-server libhiredis-dev gnuplot-nox)

PACKAGES=()
(($#)) || set -- test
for set_name in "$@"; do
  case $set_name in
    demo) PACKAGES+=("${DEMO[@]}") ;;
    test) PACKAGES+=("${TEST[@]}") ;;
    bench | --bench) PACKAGES+=("${BENCH[@]}") ;;
    fuzz) PACKAGES+=("${FUZZ[@]}") ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown set '$set_name' (demo, test, bench or fuzz)" >&2; exit 64 ;;
  esac
done
mapfile -t PACKAGES < <(printf '%s\n' "${PACKAGES[@]}" | awk '!seen[$0]++')

# Print the packages from PACKAGES that are not fully installed ("ii").
missing_packages() {
  local pkg status
  for pkg in "${PACKAGES[@]}"; do
    # ${db:Status-Abbrev} is "ii " for an installed package; dpkg-query fails
    # (non-zero) for a package it has never heard of.
    status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
    if [[ "$status" != ii* ]]; then
      printf '%s\n' "$pkg"
    fi
  done
}

mapfile -t missing < <(missing_packages)
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

if [[ "$(id -u)" -ne 0 ]]; then
  echo "install-deps: ERROR: these packages are missing and installing them needs root:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  echo "install-deps: run 'sudo $0' (or as root) once, then rerun." >&2
  exit 1
fi

echo "install-deps: installing ${#missing[@]} missing package(s): ${missing[*]}"

# Keep package maintainer scripts from starting postgresql/mariadb services.
# Only add a policy-rc.d if none exists (containers usually ship one that
# already exits 101), and remove only the one we created.
POLICY=/usr/sbin/policy-rc.d
created_policy=0
cleanup() {
  if ((created_policy)); then
    rm -f "$POLICY"
  fi
}
trap cleanup EXIT
if [[ ! -e "$POLICY" ]]; then
  printf '#!/bin/sh\n# temporary, created by sqlock scripts/install-deps.sh\nexit 101\n' >"$POLICY"
  chmod 0755 "$POLICY"
  created_policy=1
fi

export DEBIAN_FRONTEND=noninteractive
# A fresh cloud machine often runs unattended-upgrades or cloud-init's apt at
# boot: wait for the dpkg lock (up to 10 minutes) instead of failing at once.
APT_WAIT=(-o DPkg::Lock::Timeout=600)
apt-get "${APT_WAIT[@]}" update
# Install the whole list (not only the missing ones) so apt resolves them as
# one transaction. --no-upgrade: an installed package stays at its version —
# upgrading postgresql-15 under a running server makes it fail to load its
# own plpgsql.so (seen here when a newer point release reached the mirror).
# Keep existing config files if a package is reinstalled.
apt-get "${APT_WAIT[@]}" install -y --no-install-recommends --no-upgrade \
  -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
  "${PACKAGES[@]}"

mapfile -t still_missing < <(missing_packages)
if ((${#still_missing[@]} != 0)); then
  echo "install-deps: ERROR: still missing after apt-get install: ${still_missing[*]}" >&2
  exit 1
fi
echo "install-deps: done"
