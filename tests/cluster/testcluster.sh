#!/usr/bin/env bash
# A Slurm cluster of several nodes on one machine, for testing what crosses nodes.
#
#   tests/cluster/testcluster.sh start [NODES] [--elastic]
#                                        # NODES 2 (default) to 4; idempotent; --elastic: the
#                                        # cloud partition's nodes power up on demand (below)
#   tests/cluster/testcluster.sh status          # daemons, namespaces, sinfo
#   tests/cluster/testcluster.sh stop            # stop everything start made; idempotent
#   tests/cluster/testcluster.sh run CMD...      # a client command (sbatch, srun, squeue, ...) on the
#                                        # head node, with SLURM_CONF set
#   tests/cluster/testcluster.sh on NODE CMD...  # a command on node NODE (1..NODES): its network,
#                                        # hostname and /tmp
#   tests/cluster/testcluster.sh env             # the MCA settings jobs need, as export lines
#
# Each node is a network namespace (its own interface and address on a private bridge), a UTS
# namespace (its own hostname, tnode<i>) and a mount namespace whose /tmp is its own, as on a
# real node, with its own slurmd. slurmctld runs in a head namespace (thead). Everything else
# (the file system, munge's socket) is shared, like a cluster's shared file system. Paths
# under /tmp that nodes must still see (a build tree, a test's work directory) are listed in
# TRELLIS_TESTCLUSTER_SHARED (colon-separated) at start. Only this cluster's addresses are
# used: $SUBNET.1 (head) and $SUBNET.11.. (nodes), on the bridge trellis-br0; nothing listens
# outside the namespaces. Open MPI must keep to that interface: `eval "$(... env)"`.
# Partitions: debug (default, every node), and a hybrid cluster's two sides, onprem (the
# first half of the nodes, preferred) and cloud (the rest).
#
# --elastic (or TRELLIS_TESTCLUSTER_ELASTIC=1) makes the cloud partition elastic, the way cloud
# Slurm clusters are: its nodes are State=CLOUD and start powered down (no namespace, no
# slurmd). When a job needs them, slurmctld runs ResumeProgram (tests/cluster/cloud_power.sh),
# which "boots" them: namespace, address, slurmd. After SuspendTime idle seconds
# (TRELLIS_TESTCLUSTER_SUSPEND_TIME, default 15) SuspendProgram shuts them down again. A node
# that has not registered within ResumeTimeout (TRELLIS_TESTCLUSTER_RESUME_TIMEOUT, default
# 30) is marked DOWN and its job requeued. Every power event is logged in STATE/log/power.log.
#
# Needs root (namespaces, munge key), iproute2 and slurm-wlm/munge (installed if missing).
# No accounting (slurmdbd): sacct has nothing to show on this cluster.
set -euo pipefail

cmd=${1:-}
[[ $# -gt 0 ]] && shift
STATE=${TRELLIS_TESTCLUSTER_STATE:-/var/tmp/trellis-testcluster}
SUBNET=${TRELLIS_TESTCLUSTER_SUBNET:-10.213.0}
START_TIMEOUT=${TRELLIS_SLURM_START_TIMEOUT:-60}
ACCOUNTING=0
CONF="$STATE/slurm.conf"
BRIDGE=trellis-br0
MAX_NODES=4
SUSPEND_TIME=${TRELLIS_TESTCLUSTER_SUSPEND_TIME:-15}
RESUME_TIMEOUT=${TRELLIS_TESTCLUSTER_RESUME_TIMEOUT:-30}
CLUSTER_SCRIPT=testcluster.sh
# shellcheck source=tests/cluster/cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

node_ns() { echo "trellis-tnode$1"; }
head_ns() { echo "trellis-thead"; }
node_addr() { echo "$SUBNET.$((10 + $1))"; }
nodes_started() { cat "$STATE/node-count" 2> /dev/null || echo 0; }
elastic() { [[ -f "$STATE/elastic" ]]; }
onprem_nodes() { echo $((($1 + 1) / 2)); }  # onprem_nodes NODES: the first half, rounded up

# in_ns NS CMD...: CMD in network namespace NS only. `ip netns exec` would also remount /sys,
# hiding /sys/fs/cgroup, which slurmd needs.
in_ns() {
  local ns=$1
  shift
  nsenter --net="/run/netns/$ns" "$@"
}

# add_host NS VETH ADDRESS: a namespace with one interface on the bridge.
add_host() {
  local ns=$1 veth=$2 addr=$3
  ip netns list | grep -qw "$ns" || ip netns add "$ns" || die "ip netns add $ns failed"
  if ! ip link show "$veth" > /dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns" || die "creating $veth failed"
  fi
  ip link set "$veth" master "$BRIDGE" up || die "attaching $veth to $BRIDGE failed"
  in_ns "$ns" ip link set lo up
  in_ns "$ns" ip addr replace "$addr/24" dev eth0 || die "addressing eth0 in $ns failed"
  in_ns "$ns" ip link set eth0 up
}

# power_conf: slurm.conf's power saving lines for an elastic cloud partition. Onprem nodes
# never suspend; cloud nodes stay powered down until a job needs them.
power_conf() {
  cat << EOF
ResumeProgram=$STATE/power/resume
SuspendProgram=$STATE/power/suspend
ResumeFailProgram=$STATE/power/resume-fail
SuspendTime=$SUSPEND_TIME
SuspendTimeout=15
ResumeTimeout=$RESUME_TIMEOUT
ResumeRate=0
SuspendRate=0
SuspendExcParts=onprem
# powered-down cloud nodes are listed by sinfo; the power thread looks every 2 s, not 10
PrivateData=cloud
SlurmctldParameters=power_save_interval=2
EOF
}

write_conf() {  # write_conf NODES MPI_DEFAULT
  local n=$1 i cpus mem node_state
  cpus=$(nproc)
  mem=$(awk '/^MemTotal:/ { printf "%d\n", $2 / 1024 * 0.9 / '"$n"' }' /proc/meminfo)
  {
    cat << EOF
# Written by tests/cluster/testcluster.sh: $n nodes in network namespaces on one machine.
ClusterName=trellistest
SlurmctldHost=thead($SUBNET.1)
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
$(test_cluster_conf "$2")
# a node whose slurmd stops answering is DOWN after this many seconds
SlurmdTimeout=30
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
EOF
    if elastic; then power_conf; fi
    for ((i = 1; i <= n; i++)); do
      node_state=UNKNOWN
      if elastic && ((i > $(onprem_nodes "$n"))); then node_state=CLOUD; fi
      echo "NodeName=tnode$i NodeAddr=$(node_addr "$i") NodeHostname=tnode$i CPUs=$cpus RealMemory=$mem State=$node_state"
    done
    echo "PartitionName=debug Default=YES Nodes=tnode[1-$n] MaxTime=INFINITE State=UP"
    # A hybrid cluster's two sides, for burst tests: the first half of the nodes "onprem"
    # (preferred: PriorityTier), the rest "cloud"; `sbatch --partition=onprem,cloud`.
    if ((n >= 2)); then
      local half
      half=$(onprem_nodes "$n")
      echo "PartitionName=onprem Nodes=tnode[1-$half] PriorityTier=2 MaxTime=INFINITE State=UP"
      echo "PartitionName=cloud Nodes=tnode[$((half + 1))-$n] PriorityTier=1 MaxTime=INFINITE State=UP"
    fi
  } > "$CONF"
}

# start_slurmd I: node I's slurmd in its namespaces, with /tmp its own and the shared paths
# under /tmp bound back in. Standard input from /dev/null: slurmctld starts the power
# programs with it closed, and a slurmd started so opens its log as fd 0, which daemonising
# then points at /dev/null (and its socket as fd 1 or 2: it never registers). `start_slurmd I
# -b` for a node powered up: slurmd then reports the node booted now, as a booted instance
# would (the machine's real boot time predates the resume, and slurmctld would keep waiting).
start_slurmd() {
  local i=$1 boot_flag=${2:-} tmp="$STATE/nodes/tnode$1/tmp" shared_binds="" p
  mkdir -p "$tmp" "$STATE/spool/tnode$i"
  chmod 1777 "$tmp"
  local shared
  shared=$(cat "$STATE/shared")  # start's TRELLIS_TESTCLUSTER_SHARED, for power-up too
  IFS=: read -r -a paths <<< "$shared"
  for p in "${paths[@]}"; do
    [[ $p == /tmp/* ]] || continue
    [[ -d $p ]] || die "TRELLIS_TESTCLUSTER_SHARED: $p is not a directory"
    shared_binds+="mkdir -p '$p' && mount --bind '/run/trellis-host-tmp/${p#/tmp/}' '$p' && "
  done
  mkdir -p /run/trellis-host-tmp
  in_ns "$(node_ns "$i")" unshare --uts --mount --propagation private sh -c "
    hostname tnode$i &&
    mount --bind /tmp /run/trellis-host-tmp &&
    mount --bind '$tmp' /tmp && $shared_binds
    exec slurmd -f '$CONF' -N tnode$i $boot_flag" < /dev/null > "$STATE/log/slurmd-tnode$i.out" 2>&1 \
    || { show_logs; die "slurmd of tnode$i failed to start"; }
}

wait_idle() {  # wait_idle NODES: every node idle (or in use), or powered down in the cloud
  local i idle=0
  for ((i = 0; i < START_TIMEOUT * 2; i++)); do
    idle=$(run_client sinfo -h -N -p debug -o %T 2> /dev/null | grep -cE '^(idle|mixed|allocated|idle~)$' || true)
    ((idle == $1)) && return 0
    sleep 0.5
  done
  show_logs
  run_client sinfo -N -l >&2 || true
  die "$idle of $1 nodes idle after ${START_TIMEOUT}s"
}

run_client() { SLURM_CONF="$CONF" in_ns "$(head_ns)" "$@"; }

node_index() {  # node_index tnodeI: I
  [[ $1 =~ ^tnode([0-9]+)$ ]] && ((BASH_REMATCH[1] >= 1 && BASH_REMATCH[1] <= $(nodes_started))) ||
    die "no node '$1' in this cluster"
  echo "${BASH_REMATCH[1]}"
}

# power_up tnodeI: a cloud node boots: its namespace on the bridge, a fresh /tmp, its slurmd.
power_up() {
  local i
  i=$(node_index "$1")
  if pid_alive "$STATE/slurmd-tnode$i.pid"; then
    log "tnode$i is already up"
    return 0
  fi
  add_host "$(node_ns "$i")" "trellis-v$i" "$(node_addr "$i")"
  start_slurmd "$i" -b
  log "tnode$i powered up"
}

# power_down tnodeI: the instance is terminated: slurmd and anything left on the node killed,
# its namespace deleted, its local disk (/tmp) gone.
power_down() {
  local i
  i=$(node_index "$1")
  stop_pid "slurmd of tnode$i" "$STATE/slurmd-tnode$i.pid"
  kill_ns "$(node_ns "$i")"
  rm -rf "$STATE/nodes/tnode$i"
  log "tnode$i powered down"
}

# write_power_programs: the three programs slurm.conf names: cloud_power.sh with STATE.
write_power_programs() {
  local action here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  mkdir -p "$STATE/power"
  for action in resume suspend resume-fail; do
    printf '#!/bin/sh\nexec %q %q %s "$@"\n' "$here/cloud_power.sh" "$STATE" "$action" \
      > "$STATE/power/$action"
    chmod 0755 "$STATE/power/$action"
  done
  rm -f "$STATE/power/fail-resume"
  : > "$STATE/log/power.log"
  : > "$STATE/log/power.out"
}

start() {
  local n=2 i mpi=none want_elastic=${TRELLIS_TESTCLUSTER_ELASTIC:-0} a
  for a in "$@"; do
    case "$a" in
      --elastic) want_elastic=1 ;;
      *) n=$a ;;
    esac
  done
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 2 || n > MAX_NODES)); then
    die "NODES must be 2 to $MAX_NODES, got '$n'"
  fi
  [[ $(id -u) == 0 ]] || die "needs root (network namespaces, munge)"
  local running
  running=$(nodes_started)
  if ((running > 0)); then
    ((running == n)) || die "already running with $running nodes; stop it first"
    local running_elastic=0
    if elastic; then running_elastic=1; fi
    ((running_elastic == want_elastic)) ||
      die "already running $( ((running_elastic)) && echo with || echo without) --elastic; stop it first"
    pid_alive "$STATE/slurmctld.pid" || die "state says $running nodes but slurmctld is not running; stop first"
    log "already running ($running nodes, $CONF)"
    wait_idle "$n"
    return 0
  fi
  mkdir -p "$STATE"/{state,log,spool,nodes}
  rm -f "$STATE/elastic"
  : > "$STATE/log/jobcomp.txt"  # job ids start again at 1: an earlier cluster's would mix in
  [[ $want_elastic == 1 ]] && touch "$STATE/elastic"
  echo "$STATE${TRELLIS_TESTCLUSTER_SHARED:+:$TRELLIS_TESTCLUSTER_SHARED}" > "$STATE/shared"
  command -v ip > /dev/null || { apt-get update -q && apt-get install -y -q iproute2; } > "$STATE/log/apt.log" 2>&1 \
    || die "iproute2 is missing and could not be installed"
  install_packages
  start_munge
  if elastic; then
    write_power_programs
    # the power programs run in the head node's namespace and boot nodes from the host's: a
    # name for it (they may not open /proc/1/ns/net)
    ip netns list | grep -qw trellis-host || ip netns attach trellis-host $$ || die "ip netns attach failed"
  fi
  write_conf "$n" none
  if SLURM_CONF="$CONF" srun --mpi=list 2>&1 | grep -qw pmix; then mpi=pmix; fi
  write_conf "$n" "$mpi"
  echo "$n" > "$STATE/node-count"
  ip link show "$BRIDGE" > /dev/null 2>&1 || ip link add "$BRIDGE" type bridge || die "creating $BRIDGE failed"
  ip link set "$BRIDGE" up
  add_host "$(head_ns)" trellis-vh "$SUBNET.1"
  local booted=$n  # an elastic cluster boots its cloud nodes when jobs need them
  if elastic; then booted=$(onprem_nodes "$n"); fi
  for ((i = 1; i <= booted; i++)); do add_host "$(node_ns "$i")" "trellis-v$i" "$(node_addr "$i")"; done
  log "starting slurmctld on thead ($SUBNET.1)"
  in_ns "$(head_ns)" unshare --uts sh -c "hostname thead && exec slurmctld -f '$CONF'" \
    > "$STATE/log/slurmctld.out" 2>&1 || { show_logs; die "slurmctld failed to start"; }
  for ((i = 1; i <= booted; i++)); do start_slurmd "$i"; done
  wait_idle "$n"
  log "up: $n nodes ($(run_client sinfo -h -p debug -o '%D %T %c cpus' | paste -sd, -)), MpiDefault=$mpi, state $STATE"
}

# kill_ns NS: every process left in namespace NS (job steps, ranks), then the namespace.
kill_ns() {
  local ns=$1 pids
  ip netns list | grep -qw "$ns" || return 0
  read -r -a pids <<< "$(ip netns pids "$ns" 2> /dev/null | tr '\n' ' ')"
  if ((${#pids[@]} > 0)); then
    log "killing ${#pids[@]} process(es) left in $ns"
    kill -9 "${pids[@]}" 2> /dev/null || true
  fi
  ip netns del "$ns" 2> /dev/null || log "could not delete namespace $ns"
}

stop() {
  local n i
  n=$(nodes_started)
  ((n == 0)) && n=$MAX_NODES
  if pid_alive "$STATE/slurmctld.pid"; then
    run_client scancel --full --quiet -u "$(id -un)" 2> /dev/null || true
    sleep 1
  fi
  for ((i = 1; i <= n; i++)); do stop_pid "slurmd of tnode$i" "$STATE/slurmd-tnode$i.pid"; done
  stop_pid slurmctld "$STATE/slurmctld.pid"
  for ((i = 1; i <= MAX_NODES; i++)); do kill_ns "$(node_ns "$i")"; done
  kill_ns "$(head_ns)"
  ip netns del trellis-host 2> /dev/null || true  # only the name: never kill_ns it
  ip link del "$BRIDGE" 2> /dev/null || true
  stop_pid munged "$STATE/munged.pid"  # only if start started it
  rm -f "$STATE/node-count" "$STATE/elastic"
  rm -rf "$STATE/state" "$STATE/spool" "$STATE/nodes"
  log "stopped (namespaces, bridge and daemons removed)"
}

status() {
  local n i rc=0
  n=$(nodes_started)
  echo "nodes: $n (state $STATE)"
  local name file
  for name in slurmctld $(for ((i = 1; i <= n; i++)); do echo "slurmd-tnode$i"; done); do
    file="$STATE/$name.pid"
    if pid_alive "$file"; then echo "$name: running (pid $(cat "$file"))"; else echo "$name: not running"; rc=3; fi
  done
  ip netns list | grep trellis- || true
  ((rc == 0)) && run_client sinfo -N -l
  return $rc
}

case "$cmd" in
  start) start "$@" ;;
  power-up) power_up "${1:?node}" ;;  # for cloud_power.sh, slurmctld's power programs
  power-down) power_down "${1:?node}" ;;
  stop) stop ;;
  status) status ;;
  run) run_client "$@" ;;
  on)
    (($# >= 2)) || die "usage: on NODE CMD..."
    node=$1
    shift
    pid_alive "$STATE/slurmd-tnode$node.pid" || die "tnode$node has no slurmd running"
    # slurmd's namespaces: the node's network, hostname and /tmp
    nsenter -t "$(cat "$STATE/slurmd-tnode$node.pid")" --net --uts --mount "$@"
    ;;
  env)
    echo "export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=$SUBNET.0/24 OMPI_MCA_oob_tcp_if_include=$SUBNET.0/24"
    ;;
  *)
    echo "usage: $0 start [NODES]|status|stop|run CMD...|on NODE CMD...|env" >&2
    exit 2
    ;;
esac
