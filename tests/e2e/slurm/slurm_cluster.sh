#!/usr/bin/env bash
# The sbatch templates on a one-node Slurm cluster (tests/cluster/cluster.sh, Debian's slurm-wlm,
# munge, slurmdbd + MariaDB for sacct; installed with apt if missing, so this needs root):
#  1. train.sbatch on the CPU backend, 2 tasks: exit 0 and a summary.json.
#  2. preemptible.sbatch signalled mid-run (SIGUSR1 to the batch shell, as --signal=B:USR1@
#     does): the ranks checkpoint and exit 75, the script requeues the job, the next attempt
#     resumes (--resume auto, same run.dir) and its final parameters equal, bitwise, those of
#     an uninterrupted run of the same configuration (started with mpiexec).
# Exit code 77 (skip) when Slurm cannot be set up here (not root and no cluster).
# TRELLIS_SLURM_STATE (default: a fresh directory under $WORK) holds the cluster's state.
source "$(dirname "$0")/../common.sh"
py=$TRELLIS_PYTHON
if [[ $(id -u) != 0 ]]; then
  echo "SKIP: tests/cluster/cluster.sh needs root (munge key, SlurmUser=root, apt)"
  exit 77
fi
[[ -f "$FASHION_DIR/train.h5" ]] || FASHION_DIR="$TRELLIS_SRC/data/fashion-mnist"
[[ -f "$FASHION_DIR/train.h5" ]] || fail "no Fashion-MNIST data in \$TRELLIS_TEST_DATA/fashion-mnist or data/fashion-mnist"
state=${TRELLIS_SLURM_STATE:-$WORK/slurm}
chmod 0755 "$WORK"  # the MariaDB data directory inside must be reachable by user mysql
cluster="$TRELLIS_SRC/tests/cluster/cluster.sh"
trap '"$cluster" stop "$state" || true; rm -rf "$WORK"' EXIT
"$cluster" start "$state"
export SLURM_CONF="$state/slurm.conf"
export TRELLIS_BIN
unset TRELLIS_RUN_DIR
# One node with 2 CPUs: two tasks, no GPUs, a core each (the templates ask for GPUs by default).
cpu=(--ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --time=15)
sub="$WORK/submit"
mkdir -p "$sub"
cd "$sub" || fail "cd $sub"

# job_state ID: State and ExitCode of the newest attempt, from the accounting database.
job_state() { sacct -X -n -P -j "$1" -o State,ExitCode 2> /dev/null | tail -n 1; }

# wait_done ID TIMEOUT_S: waits until the job has left the queue for good. A requeued job waits
# for its BeginTime (now + 2 min, Slurm's fixed delay); as root we start it at once.
wait_done() {
  local id=$1 deadline=$((SECONDS + $2)) line
  while ((SECONDS < deadline)); do
    line=$(squeue -h -j "$id" -o "%T %r" 2> /dev/null || true)
    if [[ -z $line ]]; then
      case "$(job_state "$id")" in
        COMPLETED* | FAILED* | CANCELLED* | TIMEOUT* | NODE_FAIL* | OUT_OF_MEMORY* | PREEMPTED*)
          # While slurmctld requeues a job, it can be missing from squeue for a while, with
          # its interrupted attempt's end state as the newest record (seen in CI on a loaded
          # machine: FAILED|1:0 for an attempt that was being requeued, back in squeue more
          # than 3 s later). Only a job that stays gone for 15 s has left the queue for good.
          local gone=0
          while ((gone < 15)) && [[ -z $(squeue -h -j "$id" 2> /dev/null || true) ]]; do
            sleep 1
            gone=$((gone + 1))
          done
          ((gone >= 15)) && return 0
          ;;
      esac
    elif [[ $line == "PENDING BeginTime" ]] && ! pgrep -f "^slurmstepd: \[$id\." > /dev/null; then
      # only once the previous attempt's step daemons are gone: a new step 0 would otherwise
      # find the old one's PMIx socket still bound and fail to launch
      scontrol update JobId="$id" StartTime=now || true
    fi
    sleep 1
  done
  scontrol show job "$id" >&2 || true
  fail "job $id did not finish within $2 s"
}

# 1. train.sbatch: a short run on 2 ranks.
out1="$WORK/train.out"
rc=0
sbatch --wait "${cpu[@]}" -o "$out1" "$TRELLIS_SRC/slurm/train.sbatch" "$TRELLIS_SRC/inputs/fashion_mlp.ini" \
  --data.train="$FASHION_DIR/train.h5" --data.test="$FASHION_DIR/test.h5" --train.max_steps=40 \
  --sched.warmup_steps=5 --log.interval=10 > "$WORK/sbatch1.txt" || rc=$?
id1=$(grep -o '[0-9]*$' "$WORK/sbatch1.txt")
[[ $rc == 0 ]] || fail "train.sbatch job $id1 exited with $rc: $(tail -15 "$out1")"
summary="$sub/runs/trellis-$id1/summary.json"
[[ -f "$summary" ]] || fail "no $summary: $(tail -5 "$out1")"
$py - "$summary" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
text = json.dumps(s)
assert '"ranks": 2' in text or s.get("ranks") == 2, f"summary does not say 2 ranks: {text[:300]}"
print("train.sbatch: summary.json", sys.argv[1], "ok")
PY
grep -q "2 ranks on 1 node" "$out1" || fail "train.sbatch did not run 2 ranks: $(head -5 "$out1")"

# 2. preemptible.sbatch: signalled mid-run, requeued, resumed; equal to an uninterrupted run.
args=("$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5" --data.test=
      --train.epochs=100 --train.max_steps=800 --train.global_batch=1024 --sched.warmup_steps=20
      --model.dropout=0.1 --log.interval=50 --ckpt.interval_steps=100)
out2="$WORK/preemptible.out"
id2=$(sbatch --parsable "${cpu[@]}" -o "$out2" "$TRELLIS_SRC/slurm/preemptible.sbatch" "${args[@]}")
run2="$sub/runs/trellis-preemptible-$id2"
# Signal once the step-300 checkpoint exists (mid-run and mid-epoch: 59 steps per epoch).
for ((i = 0; i < 300; i++)); do
  [[ $(cat "$run2/checkpoints/latest" 2> /dev/null) > step-0000299 ]] && break
  [[ -z $(squeue -h -j "$id2" 2> /dev/null) ]] && fail "job $id2 ended before its first checkpoint: $(tail -10 "$out2")"
  sleep 0.5
done
[[ $(cat "$run2/checkpoints/latest" 2> /dev/null) > step-0000299 ]] || fail "job $id2 did not reach step 300 in 150 s: $(tail -10 "$out2")"
echo "signalling job $id2 at $(cat "$run2/checkpoints/latest") (SIGUSR1 to the batch shell)"
scancel --signal=USR1 --batch "$id2"
wait_done "$id2" 600
echo "---- $out2"
cat "$out2"
read -r state2 <<< "$(job_state "$id2")"
[[ $state2 == "COMPLETED|0:0" ]] || fail "job $id2 ended as $state2"
grep -q "stopping at step .* on a signal" "$out2" || fail "the ranks never saw the signal"
grep -q "requeueing job $id2" "$out2" || fail "the script did not requeue job $id2"
grep -Eq "resume: .*step-[0-9]{7}" "$out2" || fail "the requeued attempt did not resume from a checkpoint"
restarts=$(scontrol show job "$id2" | grep -o 'Restarts=[0-9]*' || true)
[[ $restarts == Restarts=1 ]] || fail "job $id2: $restarts, expected Restarts=1"

trellis_run 2 train --config "${args[@]}" --run.dir="$WORK/straight" > "$WORK/straight.log" 2>&1 \
  || fail "the uninterrupted run failed: $(tail -5 "$WORK/straight.log")"
$py - "$WORK/straight/model.h5" "$run2/model.h5" <<'PY'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
assert sorted(a["params"]) == sorted(b["params"]), "different parameter names"
for k in a["params"]:
    x, y = a["params"][k][()], b["params"][k][()]
    assert x.shape == y.shape and x.tobytes() == y.tobytes(), f"{k} differs: max |diff| {np.abs(x - y).max()}"
print(f"final parameters bitwise equal ({len(a['params'])} tensors): uninterrupted {sys.argv[1]}, preempted+requeued {sys.argv[2]}")
PY
fields=JobID,JobName,State,ExitCode,Elapsed,Start,End
sacct -e | grep -qw Restarts && fields=JobID,JobName,State,ExitCode,Restarts,Elapsed
echo "---- sacct -j $id2 (Slurm $(sinfo -V | awk '{print $2}'); $restarts from scontrol)"
sacct -j "$id2" --format="$fields"
echo "---- sacct --duplicates -j $id2"
sacct --duplicates -j "$id2" --format="$fields"
sacct --duplicates -X -n -P -j "$id2" -o State | grep -qx REQUEUED || fail "sacct shows no requeued attempt of job $id2"
# tools/cost_report from the accounting database: both attempts in Trellis and in Slurm.
echo "---- tools/cost_report $run2"
"$TRELLIS_SRC/tools/cost_report" "$run2" || fail "cost_report"
"$TRELLIS_SRC/tools/cost_report" "$run2" --json > "$WORK/cost.json" || fail "cost_report --json"
$py - "$WORK/cost.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["job_source"] == "sacct", f"job records from {r['job_source']}, not sacct"
assert r["attempts"] == 2 and len(r["slurm_attempts"]) == 2, f"attempts: {r['attempts']}, {r['slurm_attempts']}"
# 2 ranks on one node: at most 2 device-hours per node-hour allocated
assert 0 < r["device_hours"] <= 2 * r["allocated_node_hours"], r
print(f"cost_report: {r['device_hours']:.5f} device-hours, {r['allocated_node_hours']:.5f} node-hours (sacct)")
PY
echo "slurm_cluster: ok"
