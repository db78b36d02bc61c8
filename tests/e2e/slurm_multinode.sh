#!/usr/bin/env bash
# The multi-node paths on a Slurm cluster of 2 nodes in network namespaces on this machine
# (slurm/testcluster.sh: each node its own address on a private bridge, hostname and /tmp, its
# own slurmd; Open MPI between nodes over TCP on the bridge only):
#  1. multinode.sbatch on 2 nodes x 2 ranks, tp = 2 inside each node and dp across nodes: the
#     losses of the single-rank run within 1e-5; `trellis info` under srun shows both hosts
#     and the node-local ranks; no placement warning.
#  2. Placement: tp = 4 over 2 nodes of 2 ranks spans nodes: the sbatch script and Trellis
#     both warn (and the losses still agree).
#  3. Staging: data.stage into the nodes' own /tmp copies the data once per node (2 copies,
#     counted by Trellis), each node holds its copy, the shared /tmp none; a second job reuses
#     both copies.
#  4. Listening sockets: nothing of the cluster's listens in the host's namespace, and in each
#     node namespace only on the cluster's interface or loopback (`ss -ltnp`).
# Exit code 77 (skip) when not root (namespaces, munge).
source "$(dirname "$0")/common.sh"
py=$TRELLIS_PYTHON
source "$(dirname "$0")/testcluster_common.sh"

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

# 4. Where the cluster listens.
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
