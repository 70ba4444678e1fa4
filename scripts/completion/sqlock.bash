# shellcheck shell=bash
# bash completion for sqlock(1): commands, their options, and the values of
# --mode and --durability. Installed as
# share/bash-completion/completions/sqlock, which bash-completion loads the
# first time `sqlock <TAB>` is pressed; `source` it to try it by hand. It
# needs none of bash-completion's helpers, but hands PROGRAM's own words
# after `run ... --` to PROGRAM's completion when bash-completion is loaded.
#
# Durations, keys, URLs and numbers are not completed: nothing local knows
# them. The option lists mirror src/cli/main.cpp; tests/cli_extras/completion.sh
# compares them with `sqlock <command> --help`.

_sqlock() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local prev=${COMP_WORDS[COMP_CWORD - 1]:-}

  local commands="migrate run status release runs"
  # Global options are accepted before and after the command.
  local global_opts="--url --table-prefix --durability -v --verbose -h --help --version"
  local global_args="--url --table-prefix --durability"
  local -A opts=(
    [migrate]="--print-sql"
    [run]="--wait --lease --mode --fair --shared --permits --also --priority --once-per --run-key --max-attempts --conflict-exit-code --kill-after"
    [status]="--json --limit --metrics --watch --interval --count"
    [release]="--force"
    [runs]="--json --limit"
  )
  # Options that take a value: the word after one is that value.
  local -A args=(
    [migrate]=""
    [run]="--wait --lease --mode --permits --also --priority --once-per --run-key --max-attempts --conflict-exit-code --kill-after"
    [status]="--limit --interval --count"
    [release]=""
    [runs]="--limit"
  )

  # --opt=value arrives as three words ("--opt" "=" "value") because '=' is in
  # COMP_WORDBREAKS; the option is then the word before the '='.
  local option=$prev
  if [[ $cur == = ]]; then
    cur=
  elif [[ $prev == = ]] && ((COMP_CWORD >= 2)); then
    option=${COMP_WORDS[COMP_CWORD - 2]}
  fi

  # Find the command, and whether run's "--" has been typed, skipping options
  # and the values of those that take one.
  local command='' separator=0 i word
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $command == run && $word == -- ]]; then
      separator=$i
      break
    fi
    if [[ " $global_args ${command:+${args[$command]}} " == *" $word "* ]]; then
      # Skip the value, and the '=' if it was attached with one.
      if [[ ${COMP_WORDS[i + 1]:-} == = ]]; then
        ((i += 1))
      fi
      ((i += 1))
      continue
    fi
    if [[ -z $command && $word != -* && " $commands " == *" $word "* ]]; then
      command=$word
    fi
  done

  if ((separator)); then
    # PROGRAM, then its arguments: its own completion if bash-completion can
    # find one, else command names and then file names.
    if declare -F _command_offset >/dev/null; then
      _command_offset $((separator + 1))
    elif ((COMP_CWORD == separator + 1)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi

  case $option in
    --mode)
      if [[ $command == run ]]; then
        mapfile -t COMPREPLY < <(compgen -W "insert update select-for-update" -- "$cur")
        return 0
      fi
      ;;
    --durability)
      mapfile -t COMPREPLY < <(compgen -W "strict relaxed" -- "$cur")
      return 0
      ;;
  esac
  # Any other value: nothing to offer (a duration, a number, a URL, a key).
  if [[ " $global_args ${command:+${args[$command]}} " == *" $option "* ]]; then
    COMPREPLY=()
    return 0
  fi

  if [[ -z $command ]]; then
    if [[ $cur == -* ]]; then
      mapfile -t COMPREPLY < <(compgen -W "$global_opts" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
    fi
  elif [[ $cur == -* ]]; then
    local words="${opts[$command]} $global_opts"
    if [[ $command == run ]]; then
      words+=" --"
    fi
    mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur")
  else
    COMPREPLY=()
  fi
  return 0
}
complete -F _sqlock sqlock
