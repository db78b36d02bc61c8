#!/usr/bin/env bash
# The multi-node paths on a Slurm cluster of 2 nodes in network namespaces on this machine
# (tests/cluster/testcluster.sh: each node its own address on a private bridge, hostname and /tmp, its
# own slurmd; Open MPI between nodes over TCP on the bridge only):
#  1. multinode.sbatch on 2 nodes x 2 ranks, tp = 2 inside each node and dp across nodes: the
#     losses of the single-rank run within 1e-5; `trellis info` under srun shows both hosts
#     and the node-local ranks; no placement warning.
#  2. Placement: tp = 4 over 2 nodes of 2 ranks spans nodes: the sbatch script and Trellis
#     both warn (and the losses still agree).
#  3. Staging: data.stage into the nodes' own /tmp copies the data once per node (2 copies,
#     counted by Trellis), each node holds its copy, the shared /tmp none; a second job reuses
#     both copies.
#  4. Files: under umask 022 everything Trellis writes is 0640 / 0750 or tighter.
#  5. Figures, not checks: step time and exposed communication across the nodes, overlap on
#     and off, with the bridge at full speed and rate-limited (tc tbf).
#  6. Listening sockets: nothing of the cluster's listens in the host's namespace, and in each
#     node namespace only on the cluster's interface or loopback (`ss -ltnp`).
# Exit code 77 (skip) when not root (namespaces, munge).
source "$(dirname "$0")/../common.sh"
py=$TRELLIS_PYTHON
source "$(dirname "$0")/testcluster_common.sh"

umask 022
mlp=(--data.train="$FASHION_DIR/train.h5" --data.test= --model.hidden=64,32,16
     --train.max_steps=20 --train.global_batch=16 --log.interval=1 --model.dropout=0.1
     --optim.clip_norm=0.5 --sched.warmup_steps=5)
config="$TRELLIS_SRC/inputs/fashion_mlp.ini"
trellis_run 1 train --config "$config" "${mlp[@]}" --run.dir="$WORK/ref" > "$WORK/ref.log"
# Open MPI on the cluster's interface only (sbatch hands the environment to the job).
eval "$("$cluster" env)"
two_by_two=(--nodes=2 --ntasks-per-node=2 --gpus-per-node=0 --cpus-per-task=1 --time=10)

# multinode JOB ARGS...: multinode.sbatch on 2 x 2 ranks, waited for; its output in JOB.out.
multinode() {
  local job=$1 rc=0
  shift
  TRELLIS_RUN_DIR="$WORK/$job" client timeout 300 sbatch --wait "${two_by_two[@]}" \
    -o "$WORK/$job.out" "$TRELLIS_SRC/slurm/multinode.sbatch" "$config" "${mlp[@]}" "$@" \
    > /dev/null || rc=$?
  [[ $rc == 0 ]] || fail "multinode.sbatch ($job) exited $rc: $(tail -15 "$WORK/$job.out")"
}

# 1. tp inside the node, dp across nodes.
multinode tp2 --parallel.tp=2
grep -q "2 nodes (tnode\[1-2\]), 4 tasks" "$WORK/tp2.out" || fail "not 4 tasks on 2 nodes: $(head -3 "$WORK/tp2.out")"
grep -q "spans nodes" "$WORK/tp2.out" && fail "placement warning for tp=2 on nodes of 2 ranks"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/ref" "$WORK/tp2"
client srun "${two_by_two[@]}" "$TRELLIS_BIN" info > "$WORK/info.txt" 2>&1 \
  || fail "trellis info under srun failed: $(tail -5 "$WORK/info.txt")"
grep -q "ranks: 4 on 2 node(s)" "$WORK/info.txt" || fail "info: $(grep ranks: "$WORK/info.txt")"
for line in "rank    0  host tnode1 .* local rank 0/2" "rank    1  host tnode1 .* local rank 1/2" \
            "rank    2  host tnode2 .* local rank 0/2" "rank    3  host tnode2 .* local rank 1/2"; do
  grep -q "$line" "$WORK/info.txt" || fail "info has no '$line': $(grep rank "$WORK/info.txt")"
done
echo "2 nodes x 2 ranks, tp=2 x dp=2: losses equal the single-rank run; info shows tnode1, tnode2"
# Under the usual umask 022 (the job's: sbatch passes it on), what Trellis wrote is 0640 /
# 0750 at most: nothing group-writable or readable by others.
loose=$(find "$WORK/tp2" -perm /027 -printf '%m %p\n')
[[ -z $loose ]] || fail "files or directories with group-write or other permissions: $loose"
echo "run.dir: $(find "$WORK/tp2" -type f | wc -l) files, all 0640 or tighter; directories 0750 or tighter"

# 2. A tensor-parallel group across the two nodes.
multinode tp4 --parallel.tp=4
grep -q "multinode.sbatch: warning: parallel.tp=4 with 2 ranks per node" "$WORK/tp4.out" \
  || fail "no placement warning from multinode.sbatch for tp=4: $(head -5 "$WORK/tp4.out")"
grep -q "the tensor-parallel group of 4 ranks spans nodes" "$WORK/tp4.out" \
  || fail "no placement warning from trellis for tp=4: $(grep -i warn "$WORK/tp4.out")"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/ref" "$WORK/tp4"
echo "tp=4 over 2 nodes: both placement warnings, same losses"

# 3. Staging into each node's own /tmp.
stage=/tmp/trellis-e2e-stage
rm -rf "$stage"
multinode staged --data.stage="$stage"
grep -q "data staged into $stage on 2 node(s), files copied 2, reused 0" "$WORK/staged.out" \
  || fail "staging did not copy once per node: $(grep -i stag "$WORK/staged.out")"
for i in 1 2; do
  "$cluster" on "$i" test -f "$stage/train.h5" || fail "tnode$i has no staged copy"
  "$cluster" on "$i" cmp -s "$stage/train.h5" "$FASHION_DIR/train.h5" || fail "tnode$i's copy differs"
done
[[ -e $stage ]] && fail "staging wrote into the shared /tmp"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/ref" "$WORK/staged"
multinode staged-again --data.stage="$stage"
grep -q "data staged into $stage on 2 node(s), files copied 0, reused 2" "$WORK/staged-again.out" \
  || fail "the second job did not reuse the nodes' copies: $(grep -i stag "$WORK/staged-again.out")"
echo "staging: one copy per node (2), reused by the next job"

# 5 (reported, not asserted). A slower network: the nodes' bridge ports rate-limited with tbf
# (this kernel has no sch_netem, so no delay is added). dp = 2 across the nodes, one rank each,
# the MLP 784-1024-1024-10 (7.2 MB of gradients per step, 2 buckets of 4 MiB): step time and
# the communication that overlap did not hide, per step, with and without overlap.
one_per_node=(--nodes=2 --ntasks-per-node=1 --gpus-per-node=0 --cpus-per-task=1 --time=10)
wide=(--data.train="$FASHION_DIR/train.h5" --data.test= --model.hidden=1024,1024
      --train.max_steps=30 --train.global_batch=256 --log.interval=10 --parallel.bucket_mb=4)
limit() {
  local i
  for i in 1 2; do
    if [[ $1 == none ]]; then
      tc qdisc del dev "trellis-v$i" root 2> /dev/null || true
    else
      tc qdisc replace dev "trellis-v$i" root tbf rate "$1" burst 256kb latency 200ms \
        || fail "tc tbf on trellis-v$i failed"
    fi
  done
}
printf "%-10s %-8s %10s %18s\n" "bridge" "overlap" "step ms" "exposed comm ms" | tee "$WORK/network.txt"
for rate in none 1gbit 200mbit; do
  limit "$rate"
  for overlap in true false; do
    job="net-$rate-$overlap"
    TRELLIS_RUN_DIR="$WORK/$job" client timeout 300 sbatch --wait "${one_per_node[@]}" \
      -o "$WORK/$job.out" "$TRELLIS_SRC/slurm/multinode.sbatch" "$config" "${wide[@]}" \
      --parallel.overlap=$overlap > /dev/null || fail "$job failed: $(tail -5 "$WORK/$job.out")"
    "$py" - "$WORK/$job/summary.json" "$rate" "$overlap" << 'PY' | tee -a "$WORK/network.txt"
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:<10} {sys.argv[3]:<8} {1e3 * s['step_time_s']:10.1f} {1e3 * s['comm_time_s']:18.1f}")
PY
  done
done
limit none

# 6. Where the cluster listens.
ss -ltnp > "$WORK/ss-host.txt"
grep -E 'slurmctld|slurmd|trellis' "$WORK/ss-host.txt" && fail "a cluster daemon listens in the host namespace"
subnet=${TRELLIS_TESTCLUSTER_SUBNET:-10.213.0}
for ns in trellis-thead trellis-tnode1 trellis-tnode2; do
  nsenter --net="/run/netns/$ns" ss -ltnH | awk '{print $4}' > "$WORK/ss-$ns.txt"
  if grep -vE "^(127\.0\.0\.1|\[::1\]|${subnet//./\\.}\.[0-9]+|0\.0\.0\.0|\[::\]|\*):" "$WORK/ss-$ns.txt"; then
    fail "$ns listens outside the cluster's addresses"
  fi
  nsenter --net="/run/netns/$ns" ip -o addr show | awk '{print $2}' | sort -u | grep -vxE 'lo|eth0' \
    && fail "$ns has an interface other than lo and the cluster's eth0"
done
echo "listening: only inside the cluster's namespaces, whose interfaces are lo and the bridge's eth0"
echo "multi-node cluster: all checks passed"
