# shellcheck shell=bash
# Shared by tests/cluster/cluster.sh (one node on localhost) and tests/cluster/testcluster.sh (several nodes
# in network namespaces): messages, pid files, Debian packages, munge. Sourced, not run; the
# caller sets CLUSTER_SCRIPT (its name, for messages), STATE (its state directory, with log/)
# and ACCOUNTING (1: slurmdbd and MariaDB are needed too).

die() {
  echo "$CLUSTER_SCRIPT: $*" >&2
  exit 1
}
log() { echo "$CLUSTER_SCRIPT: $*" >&2; }

# show_logs: the tail of every daemon log, for error messages.
show_logs() {
  local f
  for f in "$STATE"/log/*.log "$STATE"/log/*.out "$STATE/mysql/mariadbd.log"; do
    [[ -s "$f" ]] || continue
    echo "---- tail of $f" >&2
    tail -n 15 "$f" >&2
  done
}

pid_alive() {  # pid_alive PIDFILE
  [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

install_packages() {
  local need=()
  command -v slurmctld > /dev/null || need+=(slurm-wlm)
  command -v munged > /dev/null || need+=(munge)
  if [[ $ACCOUNTING == 1 ]]; then
    command -v slurmdbd > /dev/null || need+=(slurmdbd)
    command -v mariadbd > /dev/null || need+=(mariadb-server)
  fi
  ((${#need[@]} == 0)) && return 0
  [[ $(id -u) == 0 ]] || die "missing packages ${need[*]}, and not root to install them"
  log "installing ${need[*]} (apt-get)"
  DEBIAN_FRONTEND=noninteractive apt-get update -q > "$STATE/log/apt.log" 2>&1 \
    || { tail -5 "$STATE/log/apt.log" >&2; die "apt-get update failed (log: $STATE/log/apt.log)"; }
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >> "$STATE/log/apt.log" 2>&1 \
    || { tail -5 "$STATE/log/apt.log" >&2; die "apt-get install ${need[*]} failed (log: $STATE/log/apt.log)"; }
}

start_munge() {
  if [[ ! -s /etc/munge/munge.key ]]; then
    log "creating /etc/munge/munge.key"
    mkdir -p /etc/munge
    if command -v mungekey > /dev/null; then
      mungekey --create --keyfile=/etc/munge/munge.key || die "mungekey --create failed"
    else
      dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none || die "writing the munge key failed"
    fi
  fi
  chown munge:munge /etc/munge /etc/munge/munge.key || die "chown of /etc/munge failed"
  { chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key; } || die "chmod of the munge key failed"
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown munge:munge /run/munge /var/lib/munge /var/log/munge || die "chown of munge's directories failed"
  chmod 0755 /run/munge
  if munge -n < /dev/null 2> /dev/null | unmunge > /dev/null 2>&1; then
    return 0  # a munged is already running (ours or the system's)
  fi
  log "starting munged"
  # munged refuses to run as root; run it as the munge user.
  if command -v runuser > /dev/null; then
    runuser -u munge -- /usr/sbin/munged --force > "$STATE/log/munged.log" 2>&1 \
      || { cat "$STATE/log/munged.log" >&2; die "munged failed to start"; }
  else
    su -s /bin/sh munge -c "/usr/sbin/munged --force" > "$STATE/log/munged.log" 2>&1 \
      || { cat "$STATE/log/munged.log" >&2; die "munged failed to start"; }
  fi
  local pid
  pid=$(cat /run/munge/munged.pid 2>/dev/null) || die "munged started but wrote no /run/munge/munged.pid"
  echo "$pid" > "$STATE/munged.pid"
  munge -n < /dev/null | unmunge > /dev/null || die "munge credential round trip failed after starting munged"
}

stop_pid() {  # stop_pid NAME PIDFILE
  local f=$2 pid i
  pid_alive "$f" || { rm -f "$f"; return 0; }
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 40; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$1 (pid $pid) ignored SIGTERM; killing it"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}


# test_cluster_conf MPI_DEFAULT: the slurm.conf lines both test clusters share (root daemons,
# munge, no cgroups: containers lack cgroup control, hence proctrack/linuxproc and task/none;
# fast scheduling for tests; requeue allowed).
test_cluster_conf() {
  cat << EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=$1
JobRequeue=1
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MinJobAge=300
KillWait=10
InactiveLimit=0
MailProg=/bin/true
EOF
}
