#!/usr/bin/env bash
# sqlock(1), run by ctest (tests/CMakeLists.txt) as
#   bash tests/cli_extras/man_page.sh <docs/sqlock.1> <sqlock binary>
# Checks that the page renders without a single warning, and that it
# documents exactly the commands and options the program has: each command
# has a section, and the options defined there (the .TP tags) are those of
# `sqlock <command> --help`, the global ones under GLOBAL OPTIONS.
set -euo pipefail
TEST=man_page
# shellcheck source=tests/cli_extras/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($# == 2)) || fail "usage: man_page.sh <sqlock.1> <sqlock binary>"
PAGE=$1
SQLOCK=$2
[[ -r $PAGE ]] || fail "no man page at $PAGE"
[[ -x $SQLOCK ]] || fail "no sqlock program at $SQLOCK"

# 1. Rendering, with every groff warning on ("w"; "all" leaves out undefined
# macros): man -l when man-db is installed (what a reader runs), else groff.
if command -v man >/dev/null; then
  renderer=(man --warnings=w -l "$PAGE")
elif command -v groff >/dev/null; then
  renderer=(groff -man -Tutf8 -ww "$PAGE")
else
  skip "neither man (man-db) nor groff (groff-base) is installed"
fi
warnings=$(MANWIDTH=80 "${renderer[@]}" 2>&1 >/dev/null) || fail "${renderer[*]} failed: $warnings"
[[ -z $warnings ]] || fail "${renderer[*]} warns:"$'\n'"$warnings"
text=$(MANWIDTH=80 "${renderer[@]}" 2>/dev/null)
[[ $text == *"sqlock - run commands under distributed locks"* ]] || fail "the rendered page has no NAME line"
echo "$TEST: ${renderer[0]} renders $PAGE without warnings ($(wc -l <<<"$text") lines)"

# 2. The options each section defines: "section option" lines, from the tag
# line after each .TP (\- is a hyphen in roff).
documented=$(awk '
  /^\.SH / { section = ($0 ~ /^\.SH GLOBAL OPTIONS/) ? "global" : ""; next }
  /^\.SS / { section = $2; next }
  /^\.TP/ { tag = 1; next }
  tag {
    tag = 0
    if (section == "") next
    line = $0
    gsub(/\\-/, "-", line)
    gsub(/\\f[BIRP]/, " ", line)
    while (match(line, /(^|[ "])--?[a-z][a-z-]*/)) {
      option = substr(line, RSTART, RLENGTH)
      sub(/^[ "]/, "", option)
      print section, option
      line = substr(line, RSTART + RLENGTH)
    }
  }' "$PAGE")
in_section() { awk -v s="$1" '$1 == s { print $2 }' <<<"$documented"; }

commands=$(help_commands)
[[ -n $commands ]] || fail "sqlock --help lists no commands"
sections=$(awk '/^\.SS / { print $2 }' "$PAGE")
same_set "commands with a section in $PAGE" "$commands" "$sections"

same_set "GLOBAL OPTIONS in $PAGE" "$(help_options)" "$(in_section global)"
for command in $commands; do
  # Every command's help lists -h,--help; the page documents it once, globally.
  expected=$(help_options "$command" | grep -vx -e -h -e --help)
  same_set "options of '$command' in $PAGE" "$expected" "$(in_section "$command")"
done
echo "$TEST: $PAGE documents the commands (${commands//$'\n'/ }) and every option of each, and nothing else"
