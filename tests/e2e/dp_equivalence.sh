#!/usr/bin/env bash
# Data-parallel equivalence: 50 steps at 1, 2 and 4 ranks with the same global batch and seed
# give the same loss at every step within 1e-5 relative. Dropout is on and the micro-batch
# differs between runs, so this also checks that dropout masks and gradient accumulation do
# not depend on how the global batch is split.
source "$(dirname "$0")/common.sh"
common=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini"
        --data.train="$FASHION_DIR/train.h5" --data.test= --train.max_steps=50
        --train.global_batch=64 --log.interval=1 --model.dropout=0.1 --optim.clip_norm=5 --sched.warmup_steps=10)
trellis_run 1 "${common[@]}" --train.micro_batch=16 --run.dir="$WORK/np1" > "$WORK/np1.log"
trellis_run 2 "${common[@]}" --run.dir="$WORK/np2" > "$WORK/np2.log"
trellis_run 4 "${common[@]}" --train.micro_batch=8 --run.dir="$WORK/np4" > "$WORK/np4.log"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 50 "$WORK/np1" "$WORK/np2" "$WORK/np4"

# The exchange through the communicator: small buckets (many of them), reduced while backward
# runs (the default) or after it (parallel.overlap=false), and ZeRO-1 (reduce-scatter, sharded
# AdamW state, all-gather); and through node shared memory (auto here: every rank on one node),
# plain and ZeRO-1. All the same losses. Overlap changes only when a bucket starts, so it is
# bitwise identical.
comm=(--parallel.grad_exchange=communicator)
trellis_run 4 "${common[@]}" "${comm[@]}" --train.micro_batch=8 --parallel.bucket_mb=0.01 --run.dir="$WORK/np4-small-buckets" > "$WORK/np4-sb.log"
trellis_run 4 "${common[@]}" "${comm[@]}" --train.micro_batch=8 --parallel.bucket_mb=0.01 --parallel.overlap=false --run.dir="$WORK/np4-blocking" > "$WORK/np4-blocking.log"
trellis_run 4 "${common[@]}" "${comm[@]}" --train.micro_batch=8 --parallel.bucket_mb=0.01 --parallel.zero=1 --run.dir="$WORK/np4-zero1" > "$WORK/np4-zero1.log"
grep -q "gradient exchange: communicator, buckets" "$WORK/np4-sb.log" || fail "np4-sb did not use the communicator"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 50 "$WORK/np4-small-buckets" "$WORK/np4-blocking"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 50 "$WORK/np1" "$WORK/np4-small-buckets" "$WORK/np4-zero1"
if $SHARED_MEMORY_EXCHANGE; then
  trellis_run 4 "${common[@]}" --train.micro_batch=8 --parallel.bucket_mb=0.01 --parallel.zero=1 --parallel.grad_exchange=shared_memory --run.dir="$WORK/np4-zero1-shared" > "$WORK/np4-zero1-shared.log"
  grep -q "gradient exchange: node shared memory$" "$WORK/np4.log" || fail "np4 did not exchange through shared memory"
  grep -q "gradient exchange: node shared memory, ZeRO-1" "$WORK/np4-zero1-shared.log" || fail "no shared ZeRO-1"
  "$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 50 "$WORK/np1" "$WORK/np4-zero1-shared"
else
  grep -q "gradient exchange: communicator" "$WORK/np4.log" || fail "the portable build's np4 did not use the communicator"
fi

# ZeRO-1 keeps 1/dp of the optimizer state per rank (AdamW: 2 floats per padded parameter).
"$TRELLIS_PYTHON" - "$WORK/np4-small-buckets" "$WORK/np4-zero1" <<'PY'
import json, sys
full, zero = (json.load(open(d + "/summary.json"))["optimizer_state_floats_per_rank"] for d in sys.argv[1:])
assert zero * 4 == full, f"ZeRO-1 optimizer state {zero} floats per rank, without {full}"
print(f"optimizer state per rank: {full} floats, {zero} with ZeRO-1 over 4 ranks")
PY

# The same data split into 3 shard files and read through a glob trains identically: at one
# rank the losses match the single-file run bit for bit.
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/idx_to_hdf5.py" --src "$TRELLIS_FASHION_MNIST_DIR" \
  --out-dir "$WORK/shards" --shards 3 > /dev/null
trellis_run 1 "${common[@]}" --train.micro_batch=16 --data.train="$WORK/shards/train-*.h5" \
  --run.dir="$WORK/np1-shards" > "$WORK/np1-shards.log"
trellis_run 2 "${common[@]}" --data.train="$WORK/shards/train-*.h5" --run.dir="$WORK/np2-shards" > "$WORK/np2-shards.log"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 50 "$WORK/np1" "$WORK/np1-shards"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 50 "$WORK/np1" "$WORK/np2-shards"
# Node-local staging (data.stage): the shards are copied once per node (here into $TMPDIR)
# and read from there; the same losses bit for bit.
mkdir -p "$WORK/tmp"
TMPDIR="$WORK/tmp" trellis_run 2 "${common[@]}" --data.train="$WORK/shards/train-*.h5" \
  --data.stage='$TMPDIR/stage' --run.dir="$WORK/np2-staged" > "$WORK/np2-staged.log"
[[ $(ls "$WORK/tmp/stage"/train-*.h5 | wc -l) -eq 3 ]] || fail "data.stage did not copy the 3 shards"
grep -q "data staged into $WORK/tmp/stage" "$WORK/np2-staged.log" || fail "no staging message"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 50 "$WORK/np2-shards" "$WORK/np2-staged"

# Serving batches from the in-memory cache changes nothing but speed: bitwise-identical losses.
trellis_run 2 "${common[@]}" --data.cache=memory --run.dir="$WORK/np2-cached" > "$WORK/np2-cached.log"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 50 "$WORK/np2" "$WORK/np2-cached"

# Regression: evaluation batches larger than the micro-batch but smaller than the local batch
# (the model's capacity is max(micro, eval) rows) used to overrun the model's buffers.
trellis_run 2 "${common[@]}" --data.test="$FASHION_DIR/test.h5" --train.max_steps=3 \
  --train.micro_batch=8 --train.eval_batch=16 --sched.warmup_steps=1 --run.dir="$WORK/eval-batch" > "$WORK/eval-batch.log"
grep -q '"test_accuracy"' "$WORK/eval-batch/metrics.jsonl" || fail "no evaluation logged"
