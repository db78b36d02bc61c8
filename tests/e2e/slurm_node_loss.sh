#!/usr/bin/env bash
# Losing a node mid-step, on the namespaced 2-node cluster (slurm/testcluster.sh):
#  1. preemptible.sbatch (--requeue) trains on 2 nodes x 2 ranks with periodic checkpoints;
#     mid-run every process of tnode2 is killed (its slurmd too: the node is gone).
#  2. The survivors on tnode1 exit within the watchdog timeout (fault.timeout_s), and their
#     message names the lost ranks and their host (heartbeats in run.dir/heartbeats).
#  3. Slurm declares tnode2 down, and the job is requeued (by Slurm, NODE_FAIL, or by the batch
#     script after the survivors' exit 76 named tnode2; whichever comes first). The job asks
#     for 2 nodes; the test shrinks it to the node that is left (NumNodes=1 NumTasks=2, as a
#     user would with scontrol), and the next attempt resumes the last complete checkpoint on
#     2 ranks of tnode1: another layout (dp 4 -> 2).
#  4. Its final parameters equal, bitwise, those of a run that resumes the same checkpoint on
#     2 ranks with mpiexec (the part before it is the uninterrupted 4-rank run up to the
#     checkpoint: losses within 1e-5 of it); no trellis process is left on any node.
# Prints the measured times: kill -> survivors gone, kill -> node down + requeue, -> resumed.
# Exit code 77 (skip) when not root.
source "$(dirname "$0")/common.sh"
py=$TRELLIS_PYTHON
source "$(dirname "$0")/testcluster_common.sh"

timeout_s=10
args=("$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5" --data.test=
      --train.epochs=100 --train.max_steps=600 --train.global_batch=128 --sched.warmup_steps=20
      --log.interval=10 --ckpt.interval_steps=50 --ckpt.keep=0 "--fault.timeout_s=$timeout_s"
      --parallel.grad_exchange=communicator)
run="$WORK/run"
(
  eval "$("$cluster" env)"
  TRELLIS_RUN_DIR=$run client sbatch --parsable --nodes=2 --ntasks-per-node=2 --gpus-per-node=0 \
    --cpus-per-task=1 --time=15 -o "$WORK/job.out" "$TRELLIS_SRC/slurm/preemptible.sbatch" "${args[@]}"
) > "$WORK/jobid" || fail "sbatch failed"
id=$(cat "$WORK/jobid")

# 1. Kill tnode2 once the step-100 checkpoint is complete (mid-run, mid-epoch).
for ((i = 0; i < 600; i++)); do
  [[ $(cat "$run/checkpoints/latest" 2> /dev/null) > step-0000099 ]] && break
  [[ -z $(client squeue -h -j "$id" 2> /dev/null) ]] && fail "job $id ended early: $(tail -10 "$WORK/job.out")"
  sleep 0.2
done
[[ $(cat "$run/checkpoints/latest" 2> /dev/null) > step-0000099 ]] || fail "job $id did not reach step 100: $(tail -5 "$WORK/job.out")"
sleep 0.5  # into the next steps
read -r -a victims <<< "$(ip netns pids trellis-tnode2 | tr '\n' ' ')"
killed_at=$SECONDS
kill -9 "${victims[@]}" || fail "could not kill tnode2's processes"
echo "killed every process of tnode2 (${#victims[@]}, slurmd included) at $(cat "$run/checkpoints/latest")"

# 2. The survivors end within the watchdog timeout, naming the lost ranks.
survivors() { ip netns pids trellis-tnode1 | xargs -r ps -o comm= -p 2> /dev/null | grep -c '^trellis' || true; }
while (($(survivors) > 0 && SECONDS - killed_at < 3 * timeout_s)); do sleep 0.2; done
gone_after=$((SECONDS - killed_at))
(($(survivors) == 0)) || fail "ranks on tnode1 still running ${gone_after} s after the kill"
((gone_after <= timeout_s + 5)) || fail "the survivors took $gone_after s (fault.timeout_s=$timeout_s)"
echo "survivors exited $gone_after s after the kill (fault.timeout_s=$timeout_s)"

# 3. Node down, job requeued; shrink it to the node left and let it start at once.
for ((i = 0; i < 240; i++)); do
  [[ $(client scontrol show job "$id" 2> /dev/null) == *Restarts=1* ]] && break
  sleep 0.5
done
requeued_after=$((SECONDS - killed_at))
client scontrol show job "$id" | grep -q 'Restarts=1' || fail "job $id was not requeued: $(client scontrol show job "$id" | head -5)"
client sinfo -h -n tnode2 -o %T | grep -q '^down' || fail "tnode2 is not down: $(client sinfo -N)"
echo "tnode2 down and job $id requeued $requeued_after s after the kill (SlurmdTimeout=30)"
for m in "rank 2 on tnode2: no heartbeat" "rank 3 on tnode2: no heartbeat"; do
  grep -q "$m" "$WORK/job.out" || fail "the survivors did not name the lost peer ('$m'): $(grep -A4 watchdog "$WORK/job.out")"
done
# Only a pending job takes the new size (a requeued job passes through COMPLETING first).
for ((i = 0; i < 120; i++)); do
  if [[ $(client squeue -h -j "$id" -o %T 2> /dev/null) == PENDING ]]; then
    client scontrol update JobId="$id" NumNodes=1 NumTasks=2 NumCPUs=2 2> /dev/null || true
    [[ $(client scontrol show job "$id") == *NumTasks=2\ * ]] && break
  fi
  sleep 0.5
done
[[ $(client scontrol show job "$id") == *NumTasks=2\ * ]] || fail "could not shrink job $id: $(client scontrol show job "$id" | grep -E 'JobState|NumNodes')"
client scontrol update JobId="$id" StartTime=now
for ((i = 0; i < 600; i++)); do
  [[ -z $(client squeue -h -j "$id" 2> /dev/null) ]] && break
  sleep 0.5
done
[[ -z $(client squeue -h -j "$id") ]] || fail "job $id did not finish: $(tail -5 "$WORK/job.out")"
echo "---- $WORK/job.out"
cat "$WORK/job.out"
resumed=$(grep -Eo "resume: .*step-[0-9]{7}" "$WORK/job.out" | tail -1 | grep -Eo 'step-[0-9]{7}') \
  || fail "the requeued attempt did not resume from a checkpoint"
grep -q "attempt 2 on tnode1" "$WORK/job.out" || fail "attempt 2 did not run on tnode1"
grep -q "2 ranks on 1 node(s), grid dp=2" "$WORK/job.out" || fail "attempt 2 did not run on 2 ranks"
[[ -f $run/model.h5 ]] || fail "the requeued job wrote no model.h5"
echo "requeued attempt resumed $resumed on 2 ranks of tnode1 and finished, $((SECONDS - killed_at)) s after the kill"

# 4. The same continuation with mpiexec, from a copy of the same checkpoint.
mkdir -p "$WORK/cont/checkpoints"
cp -r "$run/checkpoints/$resumed" "$WORK/cont/checkpoints/"
trellis_run 2 train --config "${args[@]}" --run.dir="$WORK/cont" --resume="$WORK/cont/checkpoints/$resumed" \
  > "$WORK/cont.log" 2>&1 || fail "the mpiexec continuation failed: $(tail -5 "$WORK/cont.log")"
"$py" - "$WORK/cont/model.h5" "$run/model.h5" << 'PY'
import sys, h5py
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert sorted(a["params"]) == sorted(b["params"]), "different parameter names"
for k in a["params"]:
    assert a["params"][k][()].tobytes() == b["params"][k][()].tobytes(), f"{k} differs"
print(f"final parameters bitwise equal to the same 2-rank continuation ({len(a['params'])} tensors)")
PY
# The part before the checkpoint: the uninterrupted 4-rank run (all 600 steps: the schedule
# depends on the step count). After it the layouts differ (dp 2 vs 4): printed, not asserted.
stop=$((10#${resumed#step-}))
trellis_run 4 train --config "${args[@]}" --run.dir="$WORK/four" > "$WORK/four.log" 2>&1 \
  || fail "the uninterrupted 4-rank run failed: $(tail -5 "$WORK/four.log")"
"$py" - "$run/metrics.jsonl" "$WORK/four/metrics.jsonl" "$stop" << 'PY'
import json, sys
def losses(path):
    return {r["step"]: r["loss"] for r in map(json.loads, open(path)) if "train_accuracy" in r}
stop = int(sys.argv[3])
a, b = losses(sys.argv[1]), losses(sys.argv[2])
before = sorted(s for s in set(a) & set(b) if s <= stop)
assert before and before[-1] == stop, f"no common logged steps up to {stop}"
worst = max(abs(a[s] - b[s]) / abs(b[s]) for s in before)
assert worst <= 1e-5, f"losses before the node loss differ from the 4-rank run by {worst}"
last = max(a)
print(f"steps 1-{stop} on 2 nodes: losses within {worst:.2g} of the uninterrupted 4-rank run; "
      f"at step {last}: {a[last]:.4f} after the node loss vs {b[last]:.4f} uninterrupted")
PY
for ns in trellis-tnode1 trellis-thead; do
  left=$(ip netns pids "$ns" | xargs -r ps -o comm= -p 2> /dev/null | grep -c '^trellis' || true)
  ((left == 0)) || fail "$left trellis processes left in $ns"
done
pgrep -x trellis > /dev/null && fail "trellis processes left on the host"
echo "node loss: all checks passed"
