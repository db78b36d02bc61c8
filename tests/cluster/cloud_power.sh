#!/usr/bin/env bash
# The elastic cloud partition's power programs for tests/cluster/testcluster.sh: slurmctld runs
# them (as SlurmUser, from the head node's namespace) through the wrappers testcluster.sh
# writes into STATE/power/, which name STATE:
#
#   cloud_power.sh STATE resume HOSTLIST        # ResumeProgram: boot the nodes
#   cloud_power.sh STATE suspend HOSTLIST       # SuspendProgram: shut them down
#   cloud_power.sh STATE resume-fail HOSTLIST   # ResumeFailProgram: Slurm gave up on them
#
# "Booting" a node is what a cloud instance's start amounts to here: its network namespace
# appears on the bridge and its slurmd starts (testcluster.sh power-up); "shutting down"
# kills everything on it, deletes the namespace and wipes its /tmp, as a terminated instance
# loses its local disk (testcluster.sh power-down). Every event goes to STATE/log/power.log,
# one line each, which is what a provider bills from:
#
#   <ISO-8601 time> <event> <node> [key=value ...]
#
# events: resume (the start was asked for: billing starts), up (slurmd started), resume-failed
# (the start failed: never billed), resume-timeout (Slurm's ResumeFailProgram), suspend (the
# shutdown was asked for), down (the node is gone: billing ends). `resume` lines carry the
# job ids Slurm resumed the node for (SLURM_RESUME_FILE). tools/cost_report reads this log.
#
# A node listed in STATE/power/fail-resume fails to start (as when the provider has no
# capacity): the test of ResumeTimeout -> DOWN -> requeue.
set -uo pipefail

# slurmctld starts its power programs with most signals blocked (SIGCHLD among them), and a
# slurmd started with that mask never finishes starting: run again with every signal
# unblocked and at its default action.
if [[ -z ${TRELLIS_POWER_SIGNALS_RESET:-} ]]; then
  export TRELLIS_POWER_SIGNALS_RESET=1
  exec /usr/bin/python3 -c '
import os, signal, sys
signal.pthread_sigmask(signal.SIG_SETMASK, [])
for s in signal.valid_signals():
    if s not in (signal.SIGKILL, signal.SIGSTOP):
        try: signal.signal(s, signal.SIG_DFL)
        except (OSError, ValueError): pass
os.execv("/bin/bash", ["bash"] + sys.argv[1:])' "$0" "$@"
fi

state=${1:?STATE}
action=${2:?action}
hostlist=${3:?hostlist}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log_file="$state/log/power.log"
export SLURM_CONF="$state/slurm.conf" TRELLIS_TESTCLUSTER_STATE="$state"
# slurmctld starts its power programs with SLURM_CONF and little else: no PATH.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

event() {  # event EVENT NODE [DETAIL...]
  local line
  line="$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ) $*"
  # one write per line: concurrent resume and suspend programs do not interleave
  printf '%s\n' "$line" >> "$log_file"
}

# The job ids Slurm resumed NODE for, from the SLURM_RESUME_FILE JSON (absent when run by hand).
jobs_for() {
  [[ -n ${SLURM_RESUME_FILE:-} && -r ${SLURM_RESUME_FILE:-} ]] || return 0
  python3 - "$SLURM_RESUME_FILE" "$1" << 'EOF' 2> /dev/null || true
import json, subprocess, sys
resume = json.load(open(sys.argv[1]))
ids = []
for job in resume.get("jobs", []):
    nodes = subprocess.run(["scontrol", "show", "hostnames", job.get("nodes", "")],
                           capture_output=True, text=True).stdout.split()
    if sys.argv[2] in nodes:
        ids.append(str(job.get("job_id")))
print(",".join(ids))
EOF
}

mapfile -t nodes < <(scontrol show hostnames "$hostlist")
((${#nodes[@]} > 0)) || { event error "-" "action=$action empty hostlist '$hostlist'"; exit 1; }

# The bridge and the nodes' namespaces live in the host's network namespace; slurmctld runs in
# the head node's, so the node work goes back to the host's first (testcluster.sh names it).
on_host() { nsenter --net=/run/netns/trellis-host "$here/testcluster.sh" "$@"; }

rc=0
case "$action" in
  resume)
    for node in "${nodes[@]}"; do
      jobs=$(jobs_for "$node")
      event resume "$node" ${jobs:+jobs=$jobs}
      if grep -qx "$node" "$state/power/fail-resume" 2> /dev/null; then
        event resume-failed "$node" "reason=injected(STATE/power/fail-resume)"
        rc=1
        continue
      fi
      if on_host power-up "$node" >> "$state/log/power.out" 2>&1; then
        event up "$node"
      else
        event resume-failed "$node" "reason=power-up-failed(see log/power.out)"
        rc=1
      fi
    done
    ;;
  suspend)
    for node in "${nodes[@]}"; do
      event suspend "$node"
      on_host power-down "$node" >> "$state/log/power.out" 2>&1 || rc=1
      event down "$node"
    done
    ;;
  resume-fail)
    # Slurm has marked the nodes DOWN and requeued their jobs; make sure nothing half-started
    # keeps running (and billing).
    for node in "${nodes[@]}"; do
      event resume-timeout "$node"
      on_host power-down "$node" >> "$state/log/power.out" 2>&1 || rc=1
    done
    ;;
  *)
    event error "-" "unknown action '$action'"
    exit 2
    ;;
esac
exit $rc
