#!/usr/bin/env bash
# A one-node Slurm cluster on localhost, for tests and trying the sbatch templates.
#
#   tests/cluster/cluster.sh start  [STATE_DIR]   # install (apt) if missing, configure, start, wait idle
#   tests/cluster/cluster.sh status [STATE_DIR]   # daemons and sinfo
#   tests/cluster/cluster.sh stop   [STATE_DIR]   # stop what start started
#   tests/cluster/cluster.sh env    [STATE_DIR]   # prints "export SLURM_CONF=..." for eval
#
# STATE_DIR (default /tmp/trellis-slurm) holds slurm.conf, slurmdbd.conf, the daemons' state,
# spool, logs and pid files. Clients (sbatch, squeue, sacct, ...) need SLURM_CONF pointing at
# STATE_DIR/slurm.conf: `eval "$(tests/cluster/cluster.sh env)"`.
#
# Debian 12 packages: slurm-wlm, munge; for accounting (sacct, Restarts, --duplicates) also
# slurmdbd and mariadb-server, run from a private data directory under STATE_DIR. Set
# TRELLIS_SLURM_ACCOUNTING=0 to run without them (sacct then has nothing to show).
# Needs root (SlurmUser=root, munge key). Containers usually lack cgroup control, hence
# ProctrackType=proctrack/linuxproc and TaskPlugin=task/none.
set -euo pipefail

cmd=${1:-}
STATE=${2:-${TRELLIS_SLURM_STATE:-/tmp/trellis-slurm}}
ACCOUNTING=${TRELLIS_SLURM_ACCOUNTING:-1}
START_TIMEOUT=${TRELLIS_SLURM_START_TIMEOUT:-60}
CONF="$STATE/slurm.conf"
export SLURM_CONF="$CONF"
DB_PORT=${TRELLIS_SLURM_DB_PORT:-16033}
DBD_PORT=${TRELLIS_SLURM_DBD_PORT:-16819}
CTLD_PORT=${TRELLIS_SLURM_CTLD_PORT:-16817}
SLURMD_PORT=${TRELLIS_SLURM_SLURMD_PORT:-16818}

CLUSTER_SCRIPT=cluster.sh
# shellcheck source=tests/cluster/cluster_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh"

# A safe RealMemory: MemTotal in MiB less 10% (slurmd drains a node that reports less than
# the configured value).
real_memory() {
  awk '/^MemTotal:/ { printf "%d\n", $2 / 1024 * 0.9 }' /proc/meminfo
}

start_db() {
  local db="$STATE/mysql" sock="$STATE/mysql/mysqld.sock"
  if ! pid_alive "$db/mariadbd.pid"; then
    if [[ ! -d "$db/mysql" ]]; then
      log "initialising a MariaDB data directory in $db"
      mkdir -p "$db"
      chown mysql:mysql "$db" 2>/dev/null || true
      mariadb-install-db --user=mysql --datadir="$db" --auth-root-authentication-method=socket \
        > "$STATE/log/mariadb-install.log" 2>&1 \
        || { tail -10 "$STATE/log/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
    fi
    log "starting mariadbd (port $DB_PORT)"
    mariadbd --user=mysql --datadir="$db" --socket="$sock" --port="$DB_PORT" --bind-address=127.0.0.1 \
      --pid-file="$db/mariadbd.pid" --log-error="$db/mariadbd.log" \
      --innodb-buffer-pool-size=32M --skip-name-resolve > /dev/null 2>&1 &
    local i
    for ((i = 0; i < 60; i++)); do
      [[ -S "$sock" ]] && mariadb -S "$sock" -e "select 1" > /dev/null 2>&1 && break
      sleep 0.5
    done
    mariadb -S "$sock" -e "select 1" > /dev/null 2>&1 || { show_logs; die "mariadbd did not come up"; }
  fi
  mariadb -S "$sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'trellis';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;" \
    || die "creating the MariaDB user for slurmdbd failed"
}

write_conf() {  # write_conf MPI_DEFAULT
  local cpus mem
  cpus=$(nproc)
  mem=$(real_memory)
  local acct="AccountingStorageType=accounting_storage/none"
  if [[ $ACCOUNTING == 1 ]]; then
    acct="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30"
  fi
  cat > "$CONF" <<EOF
# Written by tests/cluster/cluster.sh: a one-node cluster on localhost.
ClusterName=trellis
SlurmctldHost=localhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
$(test_cluster_conf "$1")
$acct
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE/log/jobcomp.txt
NodeName=localhost CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Default=YES Nodes=localhost MaxTime=INFINITE State=UP
EOF
  if [[ $ACCOUNTING == 1 ]]; then
    # slurmdbd reads slurmdbd.conf from the directory of SLURM_CONF; it must be 0600.
    cat > "$STATE/slurmdbd.conf" <<EOF
# Written by tests/cluster/cluster.sh
AuthType=auth/munge
DbdHost=localhost
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$STATE/slurmdbd.pid
LogFile=$STATE/log/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=trellis
StorageLoc=slurm_acct_db
EOF
    chmod 0600 "$STATE/slurmdbd.conf"
  fi
}

wait_idle() {
  local i state=""
  for ((i = 0; i < START_TIMEOUT * 2; i++)); do
    state=$(sinfo -h -n localhost -o %T 2> /dev/null || true)
    [[ $state == idle || $state == mixed || $state == allocated ]] && return 0
    sleep 0.5
  done
  show_logs
  sinfo -N -l >&2 || true
  local d
  for d in slurmctld slurmd; do
    pid_alive "$STATE/$d.pid" || die "$d is not running (see $STATE/log/$d.log above); the node did not become idle"
  done
  die "the node did not become idle within ${START_TIMEOUT}s (state: '${state:-no answer}')"
}

start() {
  mkdir -p "$STATE"/{state,spool,log}
  if pid_alive "$STATE/slurmctld.pid" && pid_alive "$STATE/slurmd.pid"; then
    log "already running ($CONF)"
    wait_idle
    return 0
  fi
  install_packages
  start_munge
  write_conf none
  local mpi=none
  if srun --mpi=list 2>&1 | grep -qw pmix; then mpi=pmix; fi
  write_conf "$mpi"
  if [[ $ACCOUNTING == 1 ]]; then
    start_db
    if ! pid_alive "$STATE/slurmdbd.pid"; then
      log "starting slurmdbd"
      slurmdbd > "$STATE/log/slurmdbd.out" 2>&1 || { show_logs; die "slurmdbd failed to start"; }
      local i
      for ((i = 0; i < 60; i++)); do
        sacctmgr -n -i show cluster > /dev/null 2>&1 && break
        sleep 0.5
      done
      sacctmgr -n -i show cluster > /dev/null 2>&1 || { show_logs; die "slurmdbd does not answer (sacctmgr)"; }
    fi
    if ! sacctmgr -n -P show cluster format=cluster | grep -qx trellis; then
      sacctmgr -i add cluster trellis > /dev/null || die "sacctmgr add cluster trellis failed"
    fi
  fi
  if ! pid_alive "$STATE/slurmctld.pid"; then
    log "starting slurmctld"
    slurmctld -f "$CONF" > "$STATE/log/slurmctld.out" 2>&1 || { show_logs; die "slurmctld failed to start"; }
  fi
  if ! pid_alive "$STATE/slurmd.pid"; then
    log "starting slurmd"
    slurmd -f "$CONF" > "$STATE/log/slurmd.out" 2>&1 || { show_logs; die "slurmd failed to start"; }
  fi
  wait_idle
  log "up: $(sinfo -h -o '%P %D %T %c cpus')  (export SLURM_CONF=$CONF, MpiDefault=$mpi)"
}

stop() {
  [[ -d "$STATE" ]] || { log "nothing to stop ($STATE does not exist)"; return 0; }
  # Running jobs' steps die with slurmd's stepds; cancel them first so no rank is left over.
  if pid_alive "$STATE/slurmctld.pid"; then
    scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
    sleep 1
  fi
  stop_pid slurmd "$STATE/slurmd.pid"
  stop_pid slurmctld "$STATE/slurmctld.pid"
  stop_pid slurmdbd "$STATE/slurmdbd.pid"
  stop_pid mariadbd "$STATE/mysql/mariadbd.pid"
  stop_pid munged "$STATE/munged.pid"  # only if we started it
  log "stopped"
}

status() {
  local name rc=0
  for name in munged mysql/mariadbd slurmdbd slurmctld slurmd; do
    if pid_alive "$STATE/$name.pid"; then
      echo "${name#mysql/}: running (pid $(cat "$STATE/$name.pid"))"
    else
      echo "${name#mysql/}: not running (from $STATE)"
    fi
  done
  pid_alive "$STATE/slurmctld.pid" && sinfo -N -l || rc=3
  return $rc
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  *) echo "usage: $0 start|stop|status|env [STATE_DIR]" >&2; exit 2 ;;
esac
