#!/usr/bin/env bash
# The bash completion for sqlock, run by ctest (tests/CMakeLists.txt) as
#   bash tests/cli_extras/completion.sh <scripts/completion/sqlock.bash> <sqlock binary>
# Checks that the script is valid bash, registers itself for `sqlock`, and
# completes as a user would see it: `sqlock r<TAB>` to the commands starting
# with r, each command's options to exactly those of `sqlock <command> --help`,
# --mode and --durability to values the program accepts, and durations to
# nothing. Each completion runs in a fresh `bash --norc`, with COMP_WORDS and
# COMP_CWORD set as readline sets them.
set -euo pipefail
TEST=completion
# shellcheck source=tests/cli_extras/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

(($# == 2)) || fail "usage: completion.sh <sqlock.bash> <sqlock binary>"
SCRIPT=$(realpath "$1")
SQLOCK=$(realpath "$2")
[[ -r $SCRIPT ]] || fail "no completion script at $SCRIPT"
[[ -x $SQLOCK ]] || fail "no sqlock program at $SQLOCK"

bash -n "$SCRIPT" || fail "bash -n $SCRIPT: not valid bash"

registered=$(bash --norc --noprofile -c 'source "$1" && complete -p sqlock' _ "$SCRIPT") ||
  fail "sourcing $SCRIPT registers no completion for sqlock"
[[ $registered == "complete -F _sqlock sqlock" ]] || fail "unexpected registration: $registered"

# complete WORD...: the sorted candidates for the command line WORD... with
# the cursor in the last word (give "" for an empty one).
complete_words() {
  bash --norc --noprofile -c '
    source "$1"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
    _sqlock
    printf "%s\n" "${COMPREPLY[@]}"' _ "$SCRIPT" "$@" | sed '/^$/d' | sort -u
}

# expect WORDS... => CANDIDATES...: the candidates must be exactly these
# (each CANDIDATES argument may hold several, separated by white space).
expect() {
  local words=() got wanted
  while [[ $1 != "=>" ]]; do
    words+=("$1")
    shift
  done
  shift
  got=$(complete_words "${words[@]}")
  wanted=$(printf '%s\n' "$@" | tr ' ' '\n' | sed '/^$/d' | sort -u)
  [[ $got == "$wanted" ]] ||
    fail "'${words[*]}<TAB>' completes to [${got//$'\n'/ }], expected [${wanted//$'\n'/ }]"
}

# 1. Commands.
commands=$(help_commands)
expect sqlock r "=>" "$(grep '^r' <<<"$commands")"
expect sqlock "" "=>" "$commands"
expect sqlock --url sqlite:x.db r "=>" "$(grep '^r' <<<"$commands")"
expect sqlock -v st "=>" status

# 2. Options, against the program's own help. Global options are offered
# everywhere (sqlock takes them after the command too), and run adds "--".
global=$(help_options)
same_set "'sqlock -<TAB>'" "$global" "$(complete_words sqlock -)"
for command in $commands; do
  expected=$(printf '%s\n%s\n' "$global" "$(help_options "$command")")
  [[ $command == run ]] && expected+=$'\n--'
  same_set "'sqlock $command -<TAB>'" "$expected" "$(complete_words sqlock "$command" -)"
done
expect sqlock run --l "=>" --lease
expect sqlock status --limit 5 --j "=>" --json

# 3. Values: the modes and durabilities offered are the ones the program
# takes (each is run for real on a scratch SQLite file); durations, numbers
# and keys are not completed.
modes=$(complete_words sqlock run --mode "")
[[ $modes == $'insert\nselect-for-update\nupdate' ]] || fail "--mode completes to [${modes//$'\n'/ }]"
expect sqlock run --mode s "=>" select-for-update
expect sqlock run --mode = up "=>" update
expect sqlock run --wait 5s --mode = "=>" "$modes"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for mode in $modes; do
  # select-for-update is refused on SQLite, with a reason other than an unknown mode.
  if out=$("$SQLOCK" --url "sqlite:$scratch/modes.db" run --mode "$mode" "mode-$mode" -- true 2>&1); then
    continue
  fi
  [[ $out != *"is not a mode"* ]] || fail "sqlock refuses the completed mode '$mode': $out"
done
durabilities=$(complete_words sqlock --durability "")
[[ -n $durabilities ]] || fail "--durability completes to nothing"
for durability in $durabilities; do
  "$SQLOCK" --url "sqlite:$scratch/durability.db" --durability "$durability" status >/dev/null ||
    fail "sqlock refuses the completed durability '$durability'"
done
expect sqlock run --durability r "=>" relaxed

for option in --wait --lease --once-per --kill-after --priority --run-key; do
  expect sqlock run "$option" "" "=>"
  expect sqlock run "$option" = "=>"
done
expect sqlock status --limit "" "=>"
expect sqlock status --watch --interval "" "=>"
expect sqlock status --watch --count "" "=>"
expect sqlock status --w "=>" --watch
expect sqlock run backup "" "=>"

# 4. After run's "--": PROGRAM is a command name, then its arguments are files.
programs=$(complete_words sqlock run --wait 5m backup -- bas)
grep -qx bash <<<"$programs" || fail "'sqlock run backup -- bas<TAB>' does not offer bash"
expect sqlock run backup -- ls "$scratch/modes.d" "=>" "$scratch/modes.db"
# A "--mode" after "--" belongs to PROGRAM: no sqlock values there.
modes_after=$(complete_words sqlock run backup -- env --mode "")
[[ $modes_after != *select-for-update* ]] || fail "completes sqlock's modes for PROGRAM's own --mode"

echo "$TEST: $SCRIPT completes commands, options ($(wc -w <<<"$commands") commands against --help), values and PROGRAM"
