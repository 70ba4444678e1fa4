# shellcheck shell=bash
# A three-node MariaDB Galera cluster on loopback ports for scripts/ha.sh
# (sourced after lib.sh and mariadb.sh): the gl_* functions. Each node is a
# mariadb.sh server in HA/g1, HA/g2, HA/g3 (NODE/my/my.cnf, ...) with a
# [galera] section; HA/gN/ports holds its four ports: SQL, group
# communication, IST and SST. g1 bootstraps the cluster (--wsrep-new-cluster),
# g2 and g3 join it with an rsync state transfer.

GL_NODES=(g1 g2 g3)
GL_PROVIDER=/usr/lib/galera/libgalera_smm.so

gl_available() { [[ -r "$GL_PROVIDER" ]] && command -v rsync >/dev/null 2>&1; }

gl_ports() { # gl_ports NODE: "SQL GCOMM IST SST"
  cat "$HA/$1/ports"
}

gl_sql_at() { # gl_sql_at NODE SQL: run SQL as root on NODE
  local node=$1
  shift
  timeout 20 mariadb --no-defaults --protocol=socket -S "$HA/$node/my/mariadb.sock" -uroot -N -B -e "$*"
}

# gl_configure NODE: the node's my.cnf (mariadb.sh's, plus [galera]) and data.
gl_configure() {
  local node=$1 sql gcomm ist sst cluster="" n
  read -r sql gcomm ist sst <<<"$(gl_ports "$node")"
  for n in "${GL_NODES[@]}"; do cluster+="${cluster:+,}127.0.0.1:$(gl_ports "$n" | cut -d' ' -f2)"; done
  set_paths "$HA/$node"
  my_init
  # rsync SST fails when mariadbd runs as root (the joiner's rsync daemon
  # drops to nobody): the node runs as mysql (the first user= is the
  # server's; the [client] one stays root).
  sed -i '0,/^user=root$/s//user=mysql/' "$MY_CNF"
  # Galera's own timeouts stay at their defaults: shorter ones made a loaded
  # 2-core machine flap.
  cat >>"$MY_CNF" <<EOF

[galera]
wsrep_on=ON
wsrep_provider=$GL_PROVIDER
wsrep_cluster_name=sqlock_ha
wsrep_cluster_address=gcomm://$cluster
wsrep_node_name=$node
wsrep_node_address=127.0.0.1:$gcomm
wsrep_node_incoming_address=127.0.0.1:$sql
wsrep_provider_options="gmcast.listen_addr=tcp://127.0.0.1:$gcomm;ist.recv_addr=127.0.0.1:$ist"
wsrep_sst_method=rsync
wsrep_sst_receive_address=127.0.0.1:$sst
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2

[sst]
sockopt=bind=127.0.0.1
EOF
  chown -R mysql: "$HA/$node"
  chmod o+x "$HA" "$HA/$node"
  touch "$MY_DIR/.initialized"
}

# gl_wait_synced NODE: until NODE is Synced in a primary component.
gl_wait_synced() {
  local node=$1 deadline=$((SECONDS + 60)) state
  while :; do
    state=$(gl_sql_at "$node" "SELECT CONCAT(@@wsrep_on, ' ', (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
             WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'))" 2>/dev/null || true)
    [[ "$state" == "1 Synced" || "$state" == "ON Synced" ]] && return 0
    ((SECONDS < deadline)) || die "Galera node $node not Synced after 60s (state '${state:-no answer}'); see $HA/$node/my/error.log"
    sleep 0.1
  done
}

gl_launch_node() { # gl_launch_node NODE [--wsrep-new-cluster]
  local node=$1 port
  shift
  set_paths "$HA/$node"
  port=$(gl_ports "$node" | cut -d' ' -f1)
  MY_LAUNCH_ARGS=("$@")
  my_launch "$port" || die "Galera node $node failed to start"
  # shellcheck disable=SC2034 # read by my_launch
  MY_LAUNCH_ARGS=()
  gl_wait_synced "$node"
}

gl_start() {
  local node ports t0=$SECONDS
  ((IS_ROOT)) || die "the Galera topology runs its nodes as the mysql user: run as root"
  gl_available || die "Galera needs $GL_PROVIDER and rsync (packages galera-4, rsync: scripts/install-deps.sh)"
  # Four free ports per node, chosen under the port lock, which is held
  # until every node listens (a cluster start takes ~15 s).
  lock_ports
  for node in "${GL_NODES[@]}"; do
    mkdir -p "$HA/$node"
    ports=""
    for _ in 1 2 3 4; do
      local port
      while port=$(pick_port) && [[ " $ports $(cat "$HA"/g*/ports 2>/dev/null | tr '\n' ' ') " == *" $port "* ]]; do :; done
      ports+="${ports:+ }$port"
    done
    echo "$ports" >"$HA/$node/ports"
  done
  for node in "${GL_NODES[@]}"; do gl_configure "$node"; done
  gl_launch_node g1 --wsrep-new-cluster
  set_paths "$HA/g1"
  my_setup || die "Galera: creating the test database and accounts failed"
  gl_launch_node g2
  gl_launch_node g3
  unlock_ports
  log "Galera cluster of 3 started in $((SECONDS - t0))s (size $(gl_sql_at g1 "SHOW STATUS LIKE 'wsrep_cluster_size'" | cut -f2))"
  local urls=""
  for node in "${GL_NODES[@]}"; do urls+="${urls:+ }mysql://root@127.0.0.1:$(gl_ports "$node" | cut -d' ' -f1)/$DB_NAME"; done
  ha_env_add SQLOCK_TEST_HA_GALERA_URLS "$urls"
}

gl_node_arg() {
  case ${1:-} in g1 | g2 | g3) ;; 1 | 2 | 3) echo "g$1"; return ;; *) die "expected a Galera node (1, 2 or 3), got '${1:-}'" ;; esac
  echo "$1"
}

# gl_kill NODE: SIGKILL one node (no goodbye to the cluster: the others
# evict it after their suspect timeout, ~6 s, stalling commits meanwhile).
gl_kill() {
  set_paths "$HA/$1"
  my_stop crash
}

# gl_restart NODE: a killed node starts again and rejoins (IST).
gl_restart() {
  local node=$1
  gl_launch_node "$node"
}

gl_stop() {
  local node
  for node in "${GL_NODES[@]}"; do
    [[ -d "$HA/$node/my" ]] || continue
    set_paths "$HA/$node"
    my_stop clean &
  done
  wait
}

gl_status() {
  local node
  for node in "${GL_NODES[@]}"; do
    [[ -d "$HA/$node/my" ]] || continue
    set_paths "$HA/$node"
    if my_running; then
      echo "galera $node: running (port $(gl_ports "$node" | cut -d' ' -f1), $(gl_sql_at "$node" "SHOW STATUS LIKE 'wsrep_local_state_comment'" 2>/dev/null | cut -f2))"
    else
      echo "galera $node: stopped"
    fi
  done
}
