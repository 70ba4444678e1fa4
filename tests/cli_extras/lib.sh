# shellcheck shell=bash
# Shared by man_page.sh and completion.sh — what `sqlock --help` says the
# command line has, the one source both the man page and the completion are
# checked against — and, for fail and skip, by tests/package/deb.sh.

fail() {
  echo "$TEST: FAILED: $*" >&2
  exit 1
}

skip() {
  echo "$TEST: SKIPPED: $*"
  exit 77
}

# help_options ARGS...: the options in the "Options:" block of
# `sqlock ARGS... --help`, one per line ("-h,--help" gives two lines).
help_options() {
  local text
  text=$("$SQLOCK" "$@" --help) || fail "sqlock $* --help failed"
  awk '/^Options:/ { on = 1; next }
       /^[^ ]/ { on = 0 }
       on && /^  -/ { split($1, names, ","); for (i in names) print names[i] }' <<<"$text" | sort -u
}

# help_commands: the subcommands `sqlock --help` lists.
help_commands() {
  local text
  text=$("$SQLOCK" --help) || fail "sqlock --help failed"
  awk '/^Subcommands:/ { on = 1; next } /^[^ ]/ { on = 0 } on && /^  [a-z]/ { print $1 }' <<<"$text" | sort -u
}

# same_set WHAT EXPECTED ACTUAL: fails, naming the differences, unless the two
# newline-separated lists hold the same words.
same_set() {
  local what=$1 missing extra
  missing=$(comm -23 <(sort -u <<<"$2") <(sort -u <<<"$3"))
  extra=$(comm -13 <(sort -u <<<"$2") <(sort -u <<<"$3"))
  if [[ -n $missing || -n $extra ]]; then
    fail "$what: missing [${missing//$'\n'/ }], not in sqlock's help [${extra//$'\n'/ }]"
  fi
}
