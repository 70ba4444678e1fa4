# shellcheck shell=bash
# PostgreSQL primary + streaming standby for scripts/ha.sh (sourced after
# lib.sh and postgres.sh): the rp_* functions. Each node is a postgres.sh
# server in a directory of its own (HA/n1, HA/n2: NODE/pg/data, ...); HA/roles
# says which node is the primary and which the standby.
#
# Synchronous (the default): the primary has synchronous_standby_names =
# 'standby1' and the standby connects with application_name=standby1, so a
# commit returns only once the standby has flushed its WAL (sync_state =
# sync). RP_SYNC=0: asynchronous streaming (ha.sh start async-replica).

RP_SYNC=1

# Called by pg_init: what a primary needs to stream WAL to a standby.
pg_init_extra() {
  cat >>"$PG_DATA/postgresql.conf" <<EOF
wal_level = replica
max_wal_senders = 5
wal_keep_size = 64MB
hot_standby = on
EOF
  printf '%s\n' "local   replication postgres                 trust" \
    "host    replication postgres  127.0.0.1/32   trust" >>"$PG_DATA/pg_hba.conf"
}

rp_role() { # rp_role primary|standby: the node directory name holding that role ("" when none)
  [[ -s "$HA/roles" ]] || return 0
  sed -n "s/^$1=//p" "$HA/roles"
}

rp_port_of() { read_port "$HA/$1/pg/port"; }

rp_psql_at() { # rp_psql_at NODE SQL: run SQL as postgres on NODE
  local node=$1
  shift
  PGOPTIONS='' psql -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$(rp_port_of "$node")" -U postgres -d postgres -c "$*"
}

# rp_clone NODE PRIMARY_PORT: NODE becomes a fresh standby of the primary on
# PRIMARY_PORT (pg_basebackup -R; what a re-clone of an old primary is too).
rp_clone() {
  local node=$1 primary_port=$2
  set_paths "$HA/$node"
  mkdir -p "$DIR"
  PG_BIN=$(find_pgbin)
  pg_stop crash
  rm -rf "$PG_DATA"
  mkdir -p "$PG_SOCK_DIR"
  if ((IS_ROOT)); then chmod o+x "$DIR"; chown -R postgres: "$PG_DIR"; fi
  # application_name goes into primary_conninfo (postgresql.auto.conf, which
  # overrides postgresql.conf): without it the standby reports as
  # walreceiver, is never sync, and the primary's commits wait forever.
  as_pg "$PG_BIN/pg_basebackup" -D "$PG_DATA" -R -X stream -c fast --no-sync \
    -d "host=127.0.0.1 port=$primary_port user=postgres application_name=standby1" \
    >"$PG_DIR/basebackup.log" 2>&1 || { cat "$PG_DIR/basebackup.log" >&2; die "pg_basebackup failed"; }
  # The copied configuration names the primary's socket directory.
  echo "unix_socket_directories = '$PG_SOCK_DIR'" >>"$PG_DATA/postgresql.conf"
  touch "$PG_DIR/.initialized"
}

# rp_launch_node NODE: start NODE on its saved port, or on a free one.
rp_launch_node() {
  local node=$1 port rc=0
  set_paths "$HA/$node"
  PG_BIN=$(find_pgbin)
  if port=$(read_port "$PG_PORT_FILE"); then
    pg_launch "$port" || die "PostgreSQL $node failed to start on port $port"
    return 0
  fi
  lock_ports
  port=$(pick_port)
  echo "$port" >"$PG_PORT_FILE"
  pg_launch "$port" || rc=$?
  unlock_ports
  ((rc == 0)) || die "PostgreSQL $node failed to start"
}

# rp_wait_streaming PRIMARY_NODE STATE: wait until the primary sees standby1
# streaming with sync_state STATE (sync or async).
rp_wait_streaming() {
  local primary=$1 want=$2 deadline=$((SECONDS + READY_TIMEOUT)) got
  while :; do
    got=$(rp_psql_at "$primary" "SELECT sync_state FROM pg_stat_replication
                                  WHERE application_name = 'standby1' AND state = 'streaming'" 2>/dev/null || true)
    [[ "$got" == "$want" ]] && return 0
    ((SECONDS < deadline)) || die "standby1 not streaming as $want after ${READY_TIMEOUT}s (got '${got:-nothing}')"
    sleep 0.05
  done
}

# rp_set_sync PRIMARY: standby1 becomes the synchronous standby (RP_SYNC=1);
# wait until it streams in that state.
rp_set_sync() {
  local primary=$1
  if ((RP_SYNC)); then
    rp_psql_at "$primary" "ALTER SYSTEM SET synchronous_standby_names = 'standby1'" >/dev/null
    rp_psql_at "$primary" "SELECT pg_reload_conf()" >/dev/null
  fi
  rp_wait_streaming "$primary" "$( ((RP_SYNC)) && echo sync || echo async)"
}

rp_start() {
  set_paths "$HA/n1"
  mkdir -p "$DIR"
  PG_BIN=$(find_pgbin)
  start_server "PostgreSQL primary" pg
  rp_clone n2 "$(rp_port_of n1)"
  rp_launch_node n2
  printf 'primary=n1\nstandby=n2\n' >"$HA/roles"
  # Synchronous only now that the standby streams: before, every commit
  # (the setup's CREATE DATABASE too) would wait for it.
  rp_set_sync n1
  rp_write_env
}

rp_write_env() {
  local p1 p2
  p1=$(rp_port_of n1) p2=$(rp_port_of n2)
  # The node order stays fixed: libpq tries each host and keeps the one that
  # accepts writes (target_session_attrs=read-write).
  ha_env_add SQLOCK_TEST_HA_PG_URL \
    "postgresql://postgres@127.0.0.1:$p1,127.0.0.1:$p2/$DB_NAME?target_session_attrs=read-write"
  ha_env_add SQLOCK_TEST_HA_PG_SYNC "$RP_SYNC"
}

# rp_failover [GAP_SECONDS]: crash the primary (pg_ctl stop -m immediate: no
# checkpoint, no goodbye to clients), wait GAP_SECONDS (a slow failover), and
# promote the standby. The standby inherited synchronous_standby_names from
# the primary; promoted with it, every commit would wait forever for a
# standby it does not have (in SyncRep, which statement_timeout does not
# cover): it is cleared first, so the new primary commits alone.
rp_failover() {
  local gap=${1:-0} primary standby t0 t1
  primary=$(rp_role primary) standby=$(rp_role standby)
  [[ -n "$primary" && -n "$standby" ]] || die "no primary and standby to fail over (roles: $(tr '\n' ' ' <"$HA/roles" 2>/dev/null))"
  t0=$(date +%s.%N)
  set_paths "$HA/$primary"
  PG_BIN=$(find_pgbin)
  pg_stop crash
  sleep "$gap"
  rp_resume_standby  # a stopped WAL receiver would hold the promotion up
  set_paths "$HA/$standby"
  pg_running || rp_launch_node "$standby"  # stopped by stop-standby: it comes back behind
  rp_psql_at "$standby" "ALTER SYSTEM SET synchronous_standby_names = ''" >/dev/null
  rp_psql_at "$standby" "SELECT pg_reload_conf()" >/dev/null
  set_paths "$HA/$standby"
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DATA" -w -t "$READY_TIMEOUT" promote >/dev/null || die "promoting $standby failed"
  until [[ "$(rp_psql_at "$standby" "SELECT pg_is_in_recovery()" 2>/dev/null)" == f ]]; do sleep 0.02; done
  t1=$(date +%s.%N)
  printf 'primary=%s\nstandby=\nold=%s\n' "$standby" "$primary" >"$HA/roles"
  log "failover: $primary crashed, $standby promoted in $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')s (gap ${gap}s)"
}

# rp_rejoin: the crashed old primary comes back as a fresh clone of the new
# primary (pg_basebackup, under a second; simpler than pg_rewind after an
# immediate stop), on its old port, and the new primary waits for it again.
rp_rejoin() {
  local primary old
  primary=$(rp_role primary) old=$(sed -n 's/^old=//p' "$HA/roles")
  [[ -n "$old" ]] || die "no crashed primary to rejoin"
  rp_clone "$old" "$(rp_port_of "$primary")"
  rp_launch_node "$old"
  rp_set_sync "$primary"
  printf 'primary=%s\nstandby=%s\n' "$primary" "$old" >"$HA/roles"
}

# rp_walreceiver: the pid of the standby's WAL receiver.
rp_walreceiver() {
  local standby pid
  standby=$(rp_role standby)
  [[ -n "$standby" ]] || die "no standby"
  set_paths "$HA/$standby"
  pid=$(pg_postmaster_pid) || die "standby not running"
  pgrep -P "$pid" -f 'walreceiver' | head -n1
}

# rp_pause_standby / rp_resume_standby: SIGSTOP / SIGCONT the standby's WAL
# receiver. While it is stopped, a synchronous primary's commits wait (in
# SyncRep) and an asynchronous one's run ahead of the standby.
rp_pause_standby() {
  local pid
  pid=$(rp_walreceiver)
  [[ -n "$pid" ]] || die "the standby has no WAL receiver"
  kill -STOP "$pid"
  echo "$pid" >"$HA/paused-walreceiver"
}
rp_resume_standby() {
  [[ -s "$HA/paused-walreceiver" ]] || return 0
  kill -CONT "$(<"$HA/paused-walreceiver")" 2>/dev/null || true
  rm -f "$HA/paused-walreceiver"
}

# rp_stop_standby: crash the standby; it misses what the primary commits
# until failover starts it again.
rp_stop_standby() {
  local standby
  standby=$(rp_role standby)
  [[ -n "$standby" ]] || die "no standby"
  set_paths "$HA/$standby"
  PG_BIN=$(find_pgbin)
  pg_stop crash
}

rp_stop() {
  local node
  rp_resume_standby
  for node in n1 n2; do
    [[ -d "$HA/$node/pg" ]] || continue
    set_paths "$HA/$node"
    pg_stop clean &
  done
  wait
}

rp_status() {
  local node
  for node in n1 n2; do
    [[ -d "$HA/$node/pg" ]] || continue
    set_paths "$HA/$node"
    if pg_running; then
      echo "postgres $node: running (port $(read_port "$PG_PORT_FILE"), recovery $(rp_psql_at "$node" "SELECT pg_is_in_recovery()" 2>/dev/null || echo '?'))"
    else
      echo "postgres $node: stopped"
    fi
  done
}
