#!/usr/bin/env bash
# The Debian packages, run by ctest (tests/CMakeLists.txt) as
#   bash tests/package/deb.sh <source dir> <build dir> <scratch dir>
#
# Makes libsqlock-dev and sqlock with cpack from the built tree (nothing is
# compiled again), checks what each holds and that its Depends cover what it
# needs, installs both with dpkg, then, against the installed files only:
# builds tests/package/consumer with find_package(sqlock) and with
# `pkg-config --cflags --libs sqlock`, runs both (an SQLite round trip in the
# scratch dir), runs `sqlock --version`, and purges the packages again.
#
# It changes the machine, so it runs as root only (CI's throwaway machines)
# and is skipped (exit 77) elsewhere. It never removes sqlock packages it did
# not install itself: a marker in the scratch dir records that it did.
set -euo pipefail

TEST=package.deb
# fail and skip
# shellcheck source=tests/cli_extras/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../cli_extras/lib.sh"
say() { echo "$TEST: $*"; }

(($# == 3)) || fail "usage: deb.sh <source dir> <build dir> <scratch dir>"
SOURCE_DIR=$(realpath "$1")
BUILD_DIR=$(realpath "$2")
WORK_DIR=$(realpath -m "$3")
[[ -f $SOURCE_DIR/tests/package/consumer/main.cpp ]] || fail "$SOURCE_DIR is not the sqlock source tree"
[[ -f $BUILD_DIR/CPackConfig.cmake ]] || fail "$BUILD_DIR is not a configured build directory (no CPackConfig.cmake)"
case "$SOURCE_DIR/" in "$WORK_DIR"/*) fail "the scratch dir $WORK_DIR holds the sources (refusing to wipe it)" ;; esac
case "$BUILD_DIR/" in "$WORK_DIR"/*) fail "the scratch dir $WORK_DIR holds the build (refusing to wipe it)" ;; esac

cache() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt"; }
[[ $(id -u) == 0 ]] || skip "installs packages into the system, which needs root (CI runs it as root)"
for tool in cpack dpkg dpkg-deb dpkg-query pkg-config objdump; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done
[[ $(cache SQLOCK_SANITIZE) != ON ]] ||
  skip "$BUILD_DIR is a sanitizer build; packages are made from regular builds"
[[ $(cache SQLOCK_WITH_SQLITE) == ON ]] || skip "the consumers' round trip needs SQLOCK_WITH_SQLITE=ON"
CXX=$(cache CMAKE_CXX_COMPILER)

PACKAGES=(sqlock libsqlock-dev)
MARKER=$WORK_DIR/installed-by-this-test
present() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -qv 'not-installed'; }
purge() {
  dpkg --purge "${PACKAGES[@]}" >/dev/null || return 1
  rm -f "$MARKER"
}
if [[ -e $MARKER ]]; then
  say "purging the packages a killed run of this test left installed"
  purge || fail "could not purge ${PACKAGES[*]} left by an earlier run"
fi
for p in "${PACKAGES[@]}"; do
  if present "$p"; then
    skip "package $p is installed, and not by this test; remove it (apt-get purge ${PACKAGES[*]}) to run this test"
  fi
done

rm -rf "$WORK_DIR"
mkdir -p "$WORK_DIR"
cleanup() {
  local rc=$?
  if [[ -e $MARKER ]]; then
    purge || echo "$TEST: WARNING: could not purge ${PACKAGES[*]}" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- make the packages ----------------------------------------------------
say "cpack in $BUILD_DIR"
cpack --config "$BUILD_DIR/CPackConfig.cmake" -B "$WORK_DIR/debs" >"$WORK_DIR/cpack.log" 2>&1 ||
  fail "cpack failed:"$'\n'"$(cat "$WORK_DIR/cpack.log")"
dev_deb=$(echo "$WORK_DIR"/debs/libsqlock-dev_*.deb)
cli_deb=$(echo "$WORK_DIR"/debs/sqlock_*.deb)
[[ -f $dev_deb && -f $cli_deb ]] || fail "cpack made no libsqlock-dev and sqlock packages: $(ls "$WORK_DIR/debs")"
say "made $(basename "$dev_deb") and $(basename "$cli_deb") (${SECONDS}s)"

# has DEB REGEX WHAT / lacks DEB REGEX WHAT: a path in the package matches, or none does.
paths() { dpkg-deb -c "$1" | awk '{ print $6 }'; }
has() { grep -qE "$2" <<<"$(paths "$1")" || fail "$(basename "$1") has no $3 (no path matches $2)"; }
lacks() {
  local found
  found=$(grep -E "$2" <<<"$(paths "$1")" || true)
  [[ -z $found ]] || fail "$(basename "$1") has $3: ${found//$'\n'/ }"
}
has "$dev_deb" '^\./usr/include/sqlock/sqlock\.hpp$' "headers"
has "$dev_deb" '^\./usr/lib/([^/]+/)?libsqlock\.a$' "static library"
has "$dev_deb" '^\./usr/lib/([^/]+/)?cmake/sqlock/sqlockConfig\.cmake$' "CMake package"
has "$dev_deb" '^\./usr/lib/([^/]+/)?pkgconfig/sqlock\.pc$' "pkg-config file"
has "$dev_deb" '^\./usr/share/sqlock/migrations/sqlite/0001_core\.sql$' "migrations"
lacks "$dev_deb" '^\./usr/(bin|share/man)/' "the program's files"
lacks "$dev_deb" '^\./usr/local/' "files under /usr/local"
has "$cli_deb" '^\./usr/bin/sqlock$' "program"
has "$cli_deb" '^\./usr/share/man/man1/sqlock\.1\.gz$' "man page"
has "$cli_deb" '^\./usr/share/bash-completion/completions/sqlock$' "bash completion"
lacks "$cli_deb" '^\./usr/(include|lib)/' "library files"

# depends_closure DEB: the packages DEB depends on, and what they depend on,
# as installed here (every alternative counts).
depends_closure() {
  local -A seen=()
  local todo next p names
  todo=$(dpkg-deb -f "$1" Depends)
  while [[ -n $todo ]]; do
    next=
    mapfile -t names < <(sed -E 's/[,|]/\n/g' <<<"$todo" | sed -E 's/\(.*\)//; s/:[a-z0-9]+//; s/ //g' | sed '/^$/d')
    for p in "${names[@]}"; do
      [[ -z ${seen[$p]:-} ]] || continue
      seen[$p]=1
      next+=", $(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$p" 2>/dev/null || true)"
    done
    todo=${next#, }
    todo=$(tr -d '\n' <<<"$todo" | sed -E 's/^[ ,]+$//')
  done
  printf '%s\n' "${!seen[@]}"
}
# owners FILE-PATTERN: the packages that own files matching */FILE-PATTERN.
owners() { dpkg-query -S "*/$1" 2>/dev/null | sed -E 's/: .*//; s/, /\n/g; s/:[a-z0-9]+//g' | sort -u; }
# covered WHAT FILE CLOSURE PACKAGE: some owner of FILE, or a name it
# provides (libspdlog1.10 provides libspdlog1.10-fmt9), is in CLOSURE.
covered() {
  local o name
  for o in $(owners "$2"); do
    for name in "$o" $(dpkg-query -W -f='${Provides}' "$o" | tr ',' '\n' | sed -E 's/\(.*\)//; s/ //g'); do
      grep -qx "$name" <<<"$3" && return 0
    done
  done
  fail "$4 needs $2 ($1), whose package ($(owners "$2" | paste -sd' ')) is not among its dependencies"
}

# The program: every shared library it loads comes from a package it depends on.
mkdir "$WORK_DIR/cli-files"
dpkg-deb -x "$cli_deb" "$WORK_DIR/cli-files"
closure=$(depends_closure "$cli_deb")
needed=$(objdump -p "$WORK_DIR/cli-files/usr/bin/sqlock" | awk '$1 == "NEEDED" { print $2 }')
[[ -n $needed ]] || fail "objdump finds no NEEDED libraries in the packaged sqlock"
for soname in $needed; do
  covered "NEEDED" "$soname" "$closure" "sqlock"
done
say "sqlock's Depends cover its $(wc -w <<<"$needed") shared libraries: $(dpkg-deb -f "$cli_deb" Depends)"

# --- install --------------------------------------------------------------
touch "$MARKER"
dpkg -i "$dev_deb" "$cli_deb" >"$WORK_DIR/dpkg.log" 2>&1 || fail "dpkg -i failed:"$'\n'"$(cat "$WORK_DIR/dpkg.log")"
for p in "${PACKAGES[@]}"; do
  [[ $(dpkg-query -W -f='${Status}' "$p") == "install ok installed" ]] || fail "$p is not installed after dpkg -i"
done
say "installed (${SECONDS}s)"

# From here on nothing of the source or build tree is used but the consumer's
# source: the environment must not point anywhere else either.
unset CMAKE_PREFIX_PATH PKG_CONFIG_PATH CPATH LIBRARY_PATH

# The library: every library `pkg-config --libs sqlock` names comes from a
# package libsqlock-dev depends on.
pc_dir=$(pkg-config --variable=pcfiledir sqlock) || fail "pkg-config does not find sqlock.pc"
[[ $pc_dir == /usr/lib* ]] || fail "pkg-config found sqlock.pc in $pc_dir, not in the package's /usr/lib"
pc_flags=$(pkg-config --cflags --libs sqlock) || fail "pkg-config --cflags --libs sqlock failed"
closure=$(depends_closure "$dev_deb")
read -ra libs <<<"$(pkg-config --libs-only-l sqlock)"
for lib in "${libs[@]#-l}"; do
  [[ $lib == sqlock ]] && continue
  covered "pkg-config --libs" "lib$lib.so" "$closure" "libsqlock-dev"
done
say "libsqlock-dev's Depends cover '$pc_flags'"

# --- the consumers --------------------------------------------------------
consumer_src=$SOURCE_DIR/tests/package/consumer
round_trip() {
  local what=$1 exe=$2 db=$WORK_DIR/$3.db out
  out=$("$exe" "$db" 2>&1) || fail "the $what consumer failed:"$'\n'"$out"
  grep -qE '^token=[1-9][0-9]*$' <<<"$out" || fail "the $what consumer printed no positive token:"$'\n'"$out"
  grep -qx OK <<<"$out" || fail "the $what consumer did not finish:"$'\n'"$out"
  say "the $what consumer: $(paste -sd' ' <<<"$out")"
}

# pkg-config, compiled in the background while CMake configures and builds.
# shellcheck disable=SC2086 # pkg-config's output is a list of flags
"$CXX" -std=c++20 -O1 -o "$WORK_DIR/pc-consumer" "$consumer_src/main.cpp" $pc_flags \
  >"$WORK_DIR/pc-build.log" 2>&1 &
pc_build=$!

cmake -S "$consumer_src" -B "$WORK_DIR/cmake-consumer" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=$CXX" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF >"$WORK_DIR/cmake-consumer.log" 2>&1 ||
  fail "configuring the consumer with find_package(sqlock) failed:"$'\n'"$(cat "$WORK_DIR/cmake-consumer.log")"
sqlock_dir=$(sed -n 's/^sqlock_DIR:[A-Z]*=//p' "$WORK_DIR/cmake-consumer/CMakeCache.txt")
[[ $sqlock_dir == /usr/lib* ]] || fail "find_package(sqlock) found $sqlock_dir, not the package's /usr/lib"
cmake --build "$WORK_DIR/cmake-consumer" >>"$WORK_DIR/cmake-consumer.log" 2>&1 ||
  fail "building the consumer with find_package(sqlock) failed:"$'\n'"$(cat "$WORK_DIR/cmake-consumer.log")"
round_trip "find_package(sqlock)" "$WORK_DIR/cmake-consumer/consumer" cmake

wait "$pc_build" || fail "compiling the consumer with pkg-config's flags failed:"$'\n'"$(cat "$WORK_DIR/pc-build.log")"
round_trip "pkg-config" "$WORK_DIR/pc-consumer" pkg-config

# --- the program ------------------------------------------------------------
version=$(/usr/bin/sqlock --version) || fail "/usr/bin/sqlock --version failed"
# The package's own version, less its Debian revision: one number, from CMake's project().
packaged=$(dpkg-query -W -f='${Version}' sqlock) || fail "dpkg-query found no sqlock package"
[[ $version == "sqlock ${packaged%-*}" ]] || fail "/usr/bin/sqlock --version printed '$version', the package is $packaged"
[[ $(command -v sqlock) == /usr/bin/sqlock ]] || fail "sqlock on PATH is $(command -v sqlock), not the package's"
bash --norc --noprofile -c '. /usr/share/bash-completion/completions/sqlock && complete -p sqlock' >/dev/null ||
  fail "the installed completion does not register for sqlock"
if command -v man >/dev/null; then
  [[ $(man -w sqlock) == /usr/share/man/man1/sqlock.1.gz ]] || fail "man -w sqlock finds $(man -w sqlock)"
fi
say "$version"

# --- remove -------------------------------------------------------------------
purge || fail "dpkg --purge ${PACKAGES[*]} failed"
for f in /usr/bin/sqlock /usr/include/sqlock "$pc_dir/sqlock.pc" "$sqlock_dir"; do
  [[ ! -e $f ]] || fail "$f is still there after dpkg --purge"
done
say "purged; passed in ${SECONDS}s"
