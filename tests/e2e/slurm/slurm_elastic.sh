#!/usr/bin/env bash
# The elastic cloud partition of the namespaced 4-node cluster (tests/cluster/testcluster.sh
# --elastic): onprem tnode1-2 always up, cloud tnode3-4 State=CLOUD, powered down until a job
# needs them, shut down after SuspendTime idle seconds (tests/cluster/cloud_power.sh does both).
#  1. A train.sbatch job on the cloud partition (2 nodes x 1 rank) resumes both nodes, trains,
#     finishes; after the idle time both power down again (no namespace, no slurmd left).
#  2. A second job brings them back and finishes.
#  3. tnode4 fails to start (an injected provider failure): after ResumeTimeout Slurm marks
#     it DOWN and requeues the job; the operator returns it to service and the job runs.
#  4. A preempted burst: with onprem busy, a preemptible.sbatch job (--partition=onprem,cloud)
#     starts in the cloud; it is sent SIGUSR1 (as before a preemption or its time limit),
#     checkpoints, requeues itself, and its second attempt resumes on onprem, which is free by
#     then, from the checkpoint written in the cloud.
#  5. tools/cost_report on jobs 1 and 4: the node-hours billed (resume to shutdown, from the
#     power log) are the job's own plus boot plus the idle tail, beside Trellis's device-hours.
# A requeued job waits for its BeginTime (now + 2 min, Slurm's fixed delay); as root the test
# starts it at once (scontrol update StartTime=now), as an operator can.
# Prints the timeline (seconds since the first submit) and the cost reports.
# Exit code 77 (skip) when not root.
source "$(dirname "$0")/../common.sh"
TESTCLUSTER_NODES=4
TESTCLUSTER_ELASTIC=1
suspend_time=10
export TRELLIS_TESTCLUSTER_SUSPEND_TIME=$suspend_time TRELLIS_TESTCLUSTER_RESUME_TIMEOUT=20
source "$(dirname "$0")/testcluster_common.sh"
state=$TRELLIS_TESTCLUSTER_STATE
power_log="$state/log/power.log"
eval "$("$cluster" env)"
t0=$(date +%s.%N)
since() { awk -v t="$(date +%s.%N)" -v t0="$t0" 'BEGIN { printf "%6.1f s", t - t0 }'; }
say() { echo "[$(since)] $*"; }
node_states() { client sinfo -h -N -p cloud -o '%N=%T' | sort -u | paste -sd' ' -; }

# wait_for WHAT SECONDS CONDITION...: polls CONDITION every half second.
wait_for() {
  local what=$1 limit=$2 i
  shift 2
  for ((i = 0; i < limit * 2; i++)); do
    "$@" && return 0
    sleep 0.5
  done
  fail "$what not within ${limit}s (cloud: $(node_states); queue: $(client squeue -h -o '%i %T %R' | paste -sd';' -))"
}
# start_now JOB: once Slurm has requeued JOB (PENDING for its BeginTime), start it at once;
# returns when it runs again. (Slurm can set the delay twice: at the requeue request, and
# again once the old attempt is cleaned up.)
start_now() {
  local i line="" pending=false
  for ((i = 0; i < 300; i++)); do
    line=$(client squeue -h -j "$1" -o '%T %r' 2> /dev/null)
    case "$line" in
      "PENDING BeginTime") pending=true && client scontrol update JobId="$1" StartTime=now 2> /dev/null || true ;;
      PENDING*) pending=true ;;
      RUNNING* | CONFIGURING* | "") $pending && return 0 ;;
    esac
    sleep 0.5
  done
  fail "job $1 not requeued and started again within 150 s: '$line'"
}
powered_down() { [[ $(node_states) == "tnode3=idle~ tnode4=idle~" ]]; }
powered_up() { [[ $(node_states) =~ ^tnode3=(idle|mixed|allocated)\ tnode4=(idle|mixed|allocated)$ ]]; }
no_node_left() { ! ip netns list | grep -qE 'trellis-tnode(3|4)\b' && ! pgrep -f 'slurmd .* -N tnode[34]' > /dev/null; }

mlp=(--data.train="$FASHION_DIR/train.h5" --data.test= --model.hidden=64,32
     --train.global_batch=32 --log.interval=20 --parallel.grad_exchange=communicator)
config="$TRELLIS_SRC/inputs/fashion_mlp.ini"
one_per_node=(--nodes=2 --ntasks-per-node=1 --gpus-per-node=0 --cpus-per-task=1 --time=10)

# cloud_job NAME: train.sbatch on the cloud partition, waited for.
cloud_job() {
  local rc=0
  TRELLIS_RUN_DIR="$WORK/$1" client timeout 300 sbatch --wait --partition=cloud "${one_per_node[@]}" \
    -o "$WORK/$1.out" "$TRELLIS_SRC/slurm/train.sbatch" "$config" "${mlp[@]}" --train.max_steps=100 \
    > "$WORK/$1.id" || rc=$?
  ((rc == 0)) || fail "$1 exited $rc: $(tail -15 "$WORK/$1.out")"
  grep -q "on tnode\[3-4\]" "$WORK/$1.out" || fail "$1 did not run on tnode[3-4]: $(head -2 "$WORK/$1.out")"
  grep -q '"finish": "completed"' "$WORK/$1/summary.json" || fail "$1 did not complete"
}

# 0. Powered down from the start.
powered_down || fail "cloud nodes not powered down at start: $(node_states)"
no_node_left || fail "cloud nodes have namespaces or slurmd before any job"
say "cluster up: onprem tnode1-2 idle, cloud $(node_states)"

# 1. A job resumes the cloud nodes; they power down after the idle time.
cloud_job job1
say "job1 finished on tnode[3-4] ($(grep -c . "$WORK/job1/metrics.jsonl") logged steps)"
wait_for "cloud nodes powered down after job1" $((suspend_time + 40)) powered_down
wait_for "tnode3-4 namespaces and slurmd gone" 20 no_node_left
say "cloud nodes powered down: $(node_states)"
for node in tnode3 tnode4; do
  for event in resume up suspend down; do
    grep -q " $event $node" "$power_log" || fail "no '$event $node' in the power log: $(cat "$power_log")"
  done
done

# 2. A second job powers them up again.
cloud_job job2
say "job2 finished on tnode[3-4]"
wait_for "cloud nodes powered down after job2" $((suspend_time + 40)) powered_down
(($(grep -c " up tnode3" "$power_log") == 2)) || fail "tnode3 not powered up twice: $(cat "$power_log")"
say "cloud nodes powered down again"

# 3. A node that fails to resume: DOWN, the job requeued; back in service, the job runs.
echo tnode4 > "$state/power/fail-resume"
TRELLIS_RUN_DIR="$WORK/job3" client sbatch --parsable --partition=cloud "${one_per_node[@]}" \
  -o "$WORK/job3.out" "$TRELLIS_SRC/slurm/train.sbatch" "$config" "${mlp[@]}" --train.max_steps=100 \
  > "$WORK/job3.id" || fail "sbatch job3"
job3=$(cat "$WORK/job3.id")
tnode4_down() { client sinfo -h -n tnode4 -o %T | grep -q '^down'; }
wait_for "tnode4 marked down after ResumeTimeout" 60 tnode4_down
restarts=$(client scontrol show job "$job3" | grep -o 'Restarts=[0-9]*')
[[ $restarts == Restarts=1 ]] || fail "job3 not requeued once after the failed resume ($restarts)"
resume_fail_ran() { grep -q "resume-timeout tnode4" "$power_log"; }
wait_for "ResumeFailProgram for tnode4" 15 resume_fail_ran
say "tnode4 failed to resume: $(client sinfo -h -n tnode4 -o '%T (%E)'), job $job3 requeued ($restarts)"
rm -f "$state/power/fail-resume"
client scontrol update nodename=tnode4 state=resume || fail "scontrol update tnode4 state=resume"
start_now "$job3"
job_done() { [[ -z $(client squeue -h -j "$job3" 2> /dev/null) ]]; }
wait_for "job3 finished after tnode4 returned" 150 job_done
grep -q '"finish": "completed"' "$WORK/job3/summary.json" || fail "job3 did not complete: $(tail -5 "$WORK/job3.out")"
say "tnode4 back in service; job3 finished $(grep -o 'on tnode[^,]*' "$WORK/job3.out" | tail -1)"

# 4. A preempted burst job: cloud while onprem is busy, then onprem from the checkpoint.
client sbatch --parsable --partition=onprem --nodes=2 --exclusive --time=10 -o /dev/null --wrap 'sleep 600' \
  > "$WORK/blocker.id" || fail "sbatch blocker"
blocker_running() { [[ $(client squeue -h -j "$(cat "$WORK/blocker.id")" -o %T) == RUNNING ]]; }
wait_for "the onprem blocker job running" 30 blocker_running
run4="$WORK/job4"
TRELLIS_RUN_DIR=$run4 client sbatch --parsable --partition=onprem,cloud "${one_per_node[@]}" \
  -o "$WORK/job4.out" "$TRELLIS_SRC/slurm/preemptible.sbatch" "$config" "${mlp[@]}" \
  --train.max_steps=600 --train.epochs=100 > "$WORK/job4.id" || fail "sbatch job4"
job4=$(cat "$WORK/job4.id")
trained_some() { [[ -f $run4/metrics.jsonl ]] && (($(grep -c . "$run4/metrics.jsonl") >= 3)); }
wait_for "job4 training in the cloud" 120 trained_some
grep -q "attempt 1 on tnode\[3-4\]" "$WORK/job4.out" || fail "job4 did not burst to the cloud: $(head -3 "$WORK/job4.out")"
client scancel "$(cat "$WORK/blocker.id")"
client scancel --signal=USR1 --batch "$job4" || fail "scancel --signal=USR1 job4"
say "job4 training on tnode[3-4] (onprem busy); sent SIGUSR1, onprem freed"
start_now "$job4"
say "job4 checkpointed and requeued itself: $(grep -Eo 'checkpoint written; requeueing.*' "$WORK/job4.out" | head -1)"
job4_done() { [[ -z $(client squeue -h -j "$job4" 2> /dev/null) ]]; }
wait_for "job4's second attempt to finish" 240 job4_done
grep -q "attempt 2 on tnode\[1-2\]" "$WORK/job4.out" || fail "attempt 2 not on onprem: $(grep attempt "$WORK/job4.out")"
grep -q '"finish": "completed"' "$run4/summary.json" || fail "job4 did not complete: $(tail -5 "$WORK/job4.out")"
first_step=$("$TRELLIS_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["first_step"])' "$run4/summary.json")
((first_step > 0)) || fail "attempt 2 did not resume from the cloud's checkpoint (first_step $first_step)"
(($(grep -c . "$run4/attempts.jsonl") == 2)) || fail "attempts.jsonl: $(cat "$run4/attempts.jsonl")"
say "job4 attempt 2 resumed step $first_step on onprem tnode[1-2] and finished"
wait_for "cloud nodes powered down after job4" $((suspend_time + 40)) powered_down
say "cloud nodes powered down; last power event $(tail -1 "$power_log")"

# 5. The cost reports: billed = boot + job + idle tail, Trellis's device-hours beside.
echo "---- timeline (power log)"
"$TRELLIS_PYTHON" - "$power_log" "$t0" << 'PY'
import datetime, sys
t0 = float(sys.argv[2])
for line in open(sys.argv[1]):
    when, rest = line.split(" ", 1)
    t = datetime.datetime.fromisoformat(when.replace("Z", "+00:00")).timestamp()
    print(f"  {t - t0:6.1f} s  {rest.strip()}")
PY
for job in job1 job4; do
  echo "---- tools/cost_report $job"
  "$TRELLIS_SRC/tools/cost_report" "$WORK/$job" --power-log "$power_log" --jobcomp "$state/log/jobcomp.txt" \
    || fail "cost_report $job"
  "$TRELLIS_SRC/tools/cost_report" "$WORK/$job" --power-log "$power_log" --jobcomp "$state/log/jobcomp.txt" \
    --json > "$WORK/$job.cost.json" || fail "cost_report --json $job"
done
"$TRELLIS_PYTHON" - "$WORK/job1.cost.json" "$WORK/job4.cost.json" "$suspend_time" << 'PY'
import json, sys
suspend = float(sys.argv[3])
one, four = (json.load(open(p)) for p in sys.argv[1:3])
def check(ok, what):
    if not ok:
        sys.exit(f"FAIL: {what}")
# job1: two cloud nodes, each billed from resume to shutdown: boot + job + at least SuspendTime idle
check(len(one["billed_nodes"]) == 2, f"job1 billed nodes {one['billed_nodes']}")
for n in one["billed_nodes"]:
    check(n["idle_s"] >= suspend - 1, f"{n['node']} idle tail {n['idle_s']:.1f} s < SuspendTime")
    check(n["boot_s"] >= 0 and n["job_s"] > 0, f"{n['node']}: {n}")
check(abs(one["billed_breakdown_hours"]["job"] - one["allocated_node_hours"]) < 2 / 3600,
      "job1's billed in-job hours differ from its allocation")
check(one["billed_node_hours"] > one["allocated_node_hours"], "billing without boot and idle tail")
check(0 < one["device_hours"] <= one["allocated_node_hours"], "Trellis device-hours above the allocation")
# job4: two attempts in Trellis and in Slurm; only the cloud one billed by the power log
check(four["attempts"] == 2 and len(four["slurm_attempts"]) == 2, f"job4 attempts {four['slurm_attempts']}")
check(four["onprem_node_hours"] > 0 and four["billed_node_hours"] > 0, "job4: no onprem or no cloud hours")
check(0 < four["device_hours"] <= four["allocated_node_hours"], "job4 device-hours above the allocation")
print(f"job1: billed {one['billed_node_hours'] * 3600:.1f} node-s = allocated {one['allocated_node_hours'] * 3600:.1f}"
      f" + boot/idle; Trellis {one['device_hours'] * 3600:.1f} device-s")
PY
say "done"
