# shellcheck shell=bash source-path=SCRIPTDIR
# slurm-cluster.sh: a private Slurm cluster for one test run. Source it, then:
#
#   slurm_cluster_start 1      one node: this machine (its short hostname), daemons in the
#                              root namespace on 127.0.0.1
#   slurm_cluster_start 2      two nodes node1 and node2, each a network + UTS namespace
#                              (tests/netns/netns.sh); slurmctld on the bridge address
#   srun --mpi=pmix -n 4 ...   SLURM_CONF points at this cluster's slurm.conf
#   slurm_cluster_stop         daemons stopped by pid, state removed; also from the EXIT trap
#
# Everything lives in $SLURM_CLUSTER_ROOT/<pid> (default /run/tether-slurm): its own munged
# (own key and socket), slurm.conf, spool and log files, ports no other run uses. A run
# killed with SIGKILL is swept by the next slurm_cluster_start. See tests/slurm/README.md.

SLURM_CLUSTER_ROOT=${SLURM_CLUSTER_ROOT:-/run/tether-slurm}
SLURM_CLUSTER_READY_S=${SLURM_CLUSTER_READY_S:-40}
SLURM_CLUSTER_DIR=""        # this run's state directory
SLURM_CLUSTER_NODES=()      # node names
SLURM_CLUSTER_PIDS=()       # daemons started by this run
SLURM_CLUSTER_HOSTS=0       # 1: this run created network namespaces (two nodes)
SLURM_CLUSTER_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../netns/netns.sh
source "$SLURM_CLUSTER_HERE/../netns/netns.sh"

slurm_fail() { echo "slurm-cluster: $*" >&2; return 1; }

slurm_require_tools() {
  local tool
  for tool in munged mungekey slurmctld slurmd srun sinfo ss; do
    command -v "$tool" >/dev/null 2>&1 ||
      slurm_fail "'$tool' is missing: run 'bash .ci/install-deps' (Debian packages slurm-wlm, munge, iproute2)" ||
      return 1
  done
  [ "$(id -u)" -eq 0 ] || slurm_fail "the test cluster runs slurmd as root (SlurmUser=root): run as root" || return 1
  [ -n "$(find /usr/lib /usr/lib64 -name mpi_pmix.so -print -quit 2>/dev/null)" ] ||
    slurm_fail "Slurm's PMIx plugin (mpi_pmix.so) is missing: install slurm-wlm-basic-plugins" || return 1
}

# --- leftovers of killed runs ----------------------------------------------------------

slurm_pids_marked() {  # slurm_pids_marked DIR: the processes of the run whose state is DIR:
  # daemons and slurmstepd hold their log files there; srun and the tasks have SLURM_CONF
  # (unset here, so that the commands of this very scan do not match)
  (
    unset SLURM_CONF
    {
      find /proc/[0-9]*/fd -maxdepth 1 -lname "$1/*" 2>/dev/null | cut -d/ -f3
      grep -lzx "SLURM_CONF=$1/slurm.conf" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
    } | sort -u | grep -vx -e "$$" -e "$BASHPID"
  )
  return 0
}

slurm_kill_marked() {  # slurm_kill_marked DIR: SIGKILL to every process of that run
  local pids
  pids=$(slurm_pids_marked "$1")
  # shellcheck disable=SC2086  # one pid per word
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  return 0
}

slurm_sweep_stale() {  # state directories whose creating shell is gone
  local dir pid
  for dir in "$SLURM_CLUSTER_ROOT"/[0-9]*; do
    [ -d "$dir" ] || continue
    pid=${dir##*/}
    kill -0 "$pid" 2>/dev/null && continue
    echo "slurm-cluster: removing the leftovers of run $pid ($dir)" >&2
    slurm_kill_marked "$dir"
    rm -rf "$dir"
  done
  netns_sweep_stale  # the hosts of a killed two-node run
}

# --- configuration -----------------------------------------------------------------------

slurm_port_free() { [ -z "$(ss -Htan "( sport = :$1 )" 2>/dev/null)" ]; }

slurm_pick_ports() {  # sets SLURM_CTLD_PORT and SLURM_SLURMD_PORT, a free pair above 20000
  local try base
  for try in $(seq 0 40); do
    base=$((20000 + ((BASHPID * 7 + try * 101) % 20000) * 2))
    if slurm_port_free "$base" && slurm_port_free $((base + 1)); then
      SLURM_CTLD_PORT=$base SLURM_SLURMD_PORT=$((base + 1))
      return 0
    fi
  done
  slurm_fail "no free pair of TCP ports found between 20000 and 60000 (ss -tan shows them all taken)"
}

slurm_wait_munged() {  # slurm_wait_munged SOCKET: up to 10 s; fails at once if munged exited
  local deadline=$((SECONDS + 10))
  until [ -S "$1" ]; do
    slurm_daemons_alive || slurm_fail "munged exited during start-up (its log below names the cause)" || return 1
    ((SECONDS < deadline)) || slurm_fail "munged: no socket $1 after 10s" || return 1
    sleep 0.1
  done
}

slurm_start_munge() {  # a private munged: own key, socket, log
  local dir=$SLURM_CLUSTER_DIR/munge
  mkdir -p "$dir" && chmod 755 "$SLURM_CLUSTER_DIR" "$dir" &&
    mungekey --create --keyfile="$dir/munge.key" 2>"$dir/mungekey.err" ||
    { cat "$dir/mungekey.err" >&2; slurm_fail "could not create a munge key in $dir"; return 1; }
  munged --foreground --socket="$dir/munge.socket" --key-file="$dir/munge.key" --log-file="$dir/munged.log" \
    --pid-file="$dir/munged.pid" --seed-file="$dir/munged.seed" >"$dir/munged.out" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
  slurm_wait_munged "$dir/munge.socket" || { slurm_show_logs; return 1; }
}

slurm_write_conf() {  # slurm_write_conf CONTROLLER_ADDR NODE_LINES
  local dir=$SLURM_CLUSTER_DIR
  cat >"$dir/slurm.conf" <<EOF
# Written by tests/slurm/slurm-cluster.sh for run $BASHPID; removed with it.
ClusterName=tether$BASHPID
SlurmctldHost=$(hostname -s)($1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
SlurmctldPort=$SLURM_CTLD_PORT
SlurmdPort=$SLURM_SLURMD_PORT
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool-%n
TmpFS=$dir/tmp-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
$2
${SLURM_CLUSTER_EXTRA_CONF:-}
PartitionName=tether Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  mkdir -p "$dir/ctld"
}

# --- daemons -------------------------------------------------------------------------------

slurm_wait_for() {  # slurm_wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.2 s
  local what=$1 budget_s=$2 deadline=$((SECONDS + $2))
  shift 2
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || slurm_fail "$what: not ready after ${budget_s}s" || return 1
    sleep 0.2
  done
}

slurm_show_logs() {  # the last lines of every daemon log, for the failure message
  local file
  for file in "$SLURM_CLUSTER_DIR"/munge/munged.log "$SLURM_CLUSTER_DIR"/munge/munged.out \
    "$SLURM_CLUSTER_DIR"/*.log "$SLURM_CLUSTER_DIR"/*.out; do
    [ -s "$file" ] || continue
    echo "--- last lines of $file" >&2
    tail -n 15 "$file" >&2
  done
}

slurm_start_ctld() {
  slurmctld -D -i -f "$SLURM_CLUSTER_DIR/slurm.conf" >"$SLURM_CLUSTER_DIR/slurmctld.out" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
}

slurm_start_slurmd() {  # slurm_start_slurmd NODE [netns host index]
  local out=$SLURM_CLUSTER_DIR/slurmd-$1.out command=(slurmd -D -f "$SLURM_CLUSTER_DIR/slurm.conf")
  mkdir -p "$SLURM_CLUSTER_DIR/spool-$1" "$SLURM_CLUSTER_DIR/tmp-$1"
  if [ -n "${2:-}" ]; then  # nsenter execs slurmd, so $! is slurmd's pid
    local host
    host=$(netns_name "$2") || return 1
    command=(nsenter --net="/run/netns/$host" --uts="$(netns_uts_file "$host")" -- "${command[@]}")
  fi
  "${command[@]}" >"$out" 2>&1 &
  SLURM_CLUSTER_PIDS+=($!)
}

slurm_nodes_idle() {  # true when sinfo lists every node of this run as idle
  local states
  states=$(timeout 3 sinfo -h -N -o '%N %t' 2>/dev/null | sort -u) || return 1
  local node
  for node in "${SLURM_CLUSTER_NODES[@]}"; do
    grep -qx "$node idle" <<<"$states" || return 1
  done
}

slurm_daemons_alive() {
  local pid
  for pid in "${SLURM_CLUSTER_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || return 1; done
}

slurm_wait_idle() {
  local deadline=$((SECONDS + SLURM_CLUSTER_READY_S))
  while true; do
    if ! slurm_daemons_alive; then  # checked first: sinfo retries for seconds without slurmctld
      slurm_show_logs
      slurm_fail "a Slurm daemon exited during start-up (its log above names the cause)"
      return 1
    fi
    slurm_nodes_idle && return 0
    if ((SECONDS >= deadline)); then
      sinfo -N -l >&2 2>&1
      slurm_show_logs
      slurm_fail "the nodes were not idle after ${SLURM_CLUSTER_READY_S}s (sinfo and the daemon logs above)"
      return 1
    fi
    sleep 0.3
  done
}

# --- start and stop ------------------------------------------------------------------------

slurm_install_trap() {  # runs before any EXIT trap already set (e.g. netns_cleanup)
  local previous
  previous=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT$//")
  # shellcheck disable=SC2064
  trap "slurm_cluster_stop; $previous" EXIT
  [ -n "$(trap -p INT)" ] || trap 'exit 130' INT
  [ -n "$(trap -p TERM)" ] || trap 'exit 143' TERM
}

slurm_start_one_node() {
  SLURM_CLUSTER_NODES=("$(hostname -s)")
  slurm_write_conf 127.0.0.1 "NodeName=${SLURM_CLUSTER_NODES[0]} NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN" &&
    slurm_start_ctld && slurm_start_slurmd "${SLURM_CLUSTER_NODES[0]}"
}

slurm_create_hosts() {  # two network + UTS namespaces; before slurm_install_trap, so the
  # EXIT trap stops the daemons before netns_cleanup removes the hosts
  netns_create 2 --hostnames node1,node2 && SLURM_CLUSTER_HOSTS=1
}

slurm_start_two_nodes() {
  SLURM_CLUSTER_NODES=(node1 node2)
  local bridge=${NETNS_SUBNET}.1 nodes
  nodes="NodeName=node1 NodeAddr=$(netns_addr 1) CPUs=$(nproc) State=UNKNOWN
NodeName=node2 NodeAddr=$(netns_addr 2) CPUs=$(nproc) State=UNKNOWN"
  slurm_write_conf "$bridge" "$nodes" && slurm_start_ctld &&
    slurm_start_slurmd node1 1 && slurm_start_slurmd node2 2
}

slurm_cluster_start() {  # slurm_cluster_start 1|2
  local count=${1:-1}
  [ "$count" = 1 ] || [ "$count" = 2 ] || slurm_fail "slurm_cluster_start: node count '$count' must be 1 or 2" || return 1
  [ -z "$SLURM_CLUSTER_DIR" ] || slurm_fail "slurm_cluster_start: this shell already has a cluster" || return 1
  slurm_require_tools || return 1
  # munged wants every directory above its socket searchable by all
  mkdir -p "$SLURM_CLUSTER_ROOT" && chmod 755 "$SLURM_CLUSTER_ROOT" && slurm_sweep_stale
  SLURM_CLUSTER_DIR=$SLURM_CLUSTER_ROOT/$BASHPID
  rm -rf "$SLURM_CLUSTER_DIR" && mkdir -p "$SLURM_CLUSTER_DIR" || slurm_fail "cannot create $SLURM_CLUSTER_DIR" || return 1
  export SLURM_CONF=$SLURM_CLUSTER_DIR/slurm.conf
  if ((count == 2)) && ! slurm_create_hosts; then  # netns_create cleaned up after itself
    rm -rf "$SLURM_CLUSTER_DIR"; SLURM_CLUSTER_DIR=""
    return 1
  fi
  slurm_install_trap
  slurm_pick_ports && slurm_start_munge || return 1
  if ((count == 1)); then slurm_start_one_node; else slurm_start_two_nodes; fi || { slurm_show_logs; return 1; }
  slurm_wait_idle || return 1
  echo "slurm-cluster: ${SLURM_CLUSTER_NODES[*]} idle (slurmctld port $SLURM_CTLD_PORT, state $SLURM_CLUSTER_DIR)"
}

slurm_stop_daemons() {  # SIGTERM, up to 10 s, then SIGKILL
  local pid deadline=$((SECONDS + 10))
  for pid in "${SLURM_CLUSTER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${SLURM_CLUSTER_PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  SLURM_CLUSTER_PIDS=()
}

slurm_steps_done() {  # no job left and no slurmstepd still holding its log file
  [ -z "$(timeout 3 squeue -h 2>/dev/null)" ] && ! slurm_stepd_running
}

slurm_stepd_running() {
  local pid
  for pid in $(slurm_pids_marked "$SLURM_CLUSTER_DIR"); do
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == slurmstepd* ]] && return 0
  done
  return 1
}

slurm_no_process_left() { [ -z "$(slurm_pids_marked "$SLURM_CLUSTER_DIR")" ]; }

slurm_cluster_stop() {  # stops this run's daemons and removes its state; safe to call twice
  [ -n "$SLURM_CLUSTER_DIR" ] || return 0
  # squeue needs slurmctld (without it, it retries for a minute)
  if slurm_daemons_alive; then slurm_wait_for "the last job steps to end" 8 slurm_steps_done 2>/dev/null; fi
  slurm_stop_daemons
  slurm_kill_marked "$SLURM_CLUSTER_DIR"   # slurmstepd and anything else they left
  slurm_wait_for "the cluster's processes to end" 5 slurm_no_process_left 2>/dev/null
  if ((SLURM_CLUSTER_HOSTS)); then netns_cleanup; SLURM_CLUSTER_HOSTS=0; fi
  if [ "${SLURM_CLUSTER_KEEP:-0}" = 1 ]; then
    echo "slurm-cluster: kept $SLURM_CLUSTER_DIR" >&2
  else
    rm -rf "$SLURM_CLUSTER_DIR"
  fi
  unset SLURM_CONF
  SLURM_CLUSTER_DIR="" SLURM_CLUSTER_NODES=()
  return 0
}
