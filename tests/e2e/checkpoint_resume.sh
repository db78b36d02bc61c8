#!/usr/bin/env bash
# Checkpoint and resume: a run stopped by a preemption signal mid-epoch and resumed continues
# bitwise-identically (every step's loss and the final parameters); checkpoints load on other
# layouts (dp 4 -> 2 -> 1, and GPT tp2 x pp2 -> dp2 -> 1); a corrupt newest checkpoint (a
# flipped bit, or an edited `step` attribute) makes --resume auto fall back to the previous one; a rank killed during a checkpoint write leaves
# the previous checkpoint usable; a checkpoint of another model is refused (exit 3) before
# anything in run.dir is touched.
source "$(dirname "$0")/common.sh"
py=$TRELLIS_PYTHON
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=30 --train.global_batch=64 --log.interval=1
     --model.dropout=0.1 --optim.clip_norm=5 --sched.warmup_steps=5)
same_params() {  # same_params A/model.h5 B/model.h5 RTOL
  $py - "$@" <<'PY'
import sys, h5py, numpy as np
a, b, rtol = h5py.File(sys.argv[1]), h5py.File(sys.argv[2]), float(sys.argv[3])
assert sorted(a["params"]) == sorted(b["params"]), "different parameter names"
for k in a["params"]:
    x, y = a["params"][k][()], b["params"][k][()]
    worst = float(np.abs(x - y).max() / (np.abs(x).max() + 1e-30))
    assert worst <= rtol, f"{k}: relative difference {worst} > {rtol}"
print(f"final parameters equal within {rtol}: {sys.argv[1]} {sys.argv[2]}")
PY
}

# 1. Preempted at step 13 (SIGUSR1, as Slurm sends it), resumed: bitwise the straight run.
trellis_run 2 "${mlp[@]}" --run.dir="$WORK/straight" > "$WORK/straight.log"
expect_exit 75 "$WORK/preempt.log" trellis_run 2 "${mlp[@]}" --fault.inject=1:13:signal --run.dir="$WORK/pre"
grep -q "stopping at step 13 on a signal" "$WORK/preempt.log" || fail "no stop message: $(tail -3 "$WORK/preempt.log")"
[[ -f "$WORK/pre/checkpoints/step-0000013/state.h5" && "$(cat "$WORK/pre/checkpoints/latest")" == step-0000013 ]] \
  || fail "no checkpoint at step 13"
[[ ! -f "$WORK/pre/model.h5" ]] || fail "a preempted run wrote model.h5"
trellis_run 2 "${mlp[@]}" --run.dir="$WORK/pre" --resume auto > "$WORK/resume.log"
grep -q "resume: .*step-0000013" "$WORK/resume.log" || fail "did not resume from step 13"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 30 "$WORK/straight" "$WORK/pre"
same_params "$WORK/straight/model.h5" "$WORK/pre/model.h5" 0

# 2. Layout-independent: written at dp4, resumed at dp2, then at dp1 (within fp tolerance).
trellis_run 4 "${mlp[@]}" --ckpt.interval_steps=10 --fault.inject=0:10:signal --run.dir="$WORK/lay" > "$WORK/lay4.log" || true
[[ "$(cat "$WORK/lay/checkpoints/latest")" == step-0000010 ]] || fail "no dp4 checkpoint at step 10"
trellis_run 2 "${mlp[@]}" --ckpt.interval_steps=10 --fault.inject=0:20:signal --run.dir="$WORK/lay" --resume auto > "$WORK/lay2.log" || true
grep -q "resume: .*step-0000010" "$WORK/lay2.log" || fail "dp2 did not resume the dp4 checkpoint"
trellis_run 1 "${mlp[@]}" --ckpt.interval_steps=10 --run.dir="$WORK/lay" --resume auto > "$WORK/lay1.log"
grep -q "resume: .*step-0000020" "$WORK/lay1.log" || fail "dp1 did not resume the dp2 checkpoint"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 30 "$WORK/straight" "$WORK/lay"
same_params "$WORK/straight/model.h5" "$WORK/lay/model.h5" 1e-3

# 3. A flipped bit in the newest checkpoint: --resume auto warns and takes the previous one.
trellis_run 2 "${mlp[@]}" --ckpt.interval_steps=10 --fault.inject=0:20:signal --run.dir="$WORK/flip" > "$WORK/flip1.log" || true
$py - "$WORK/flip/checkpoints/step-0000020/state.h5" <<'PY'
import sys, h5py
path = sys.argv[1]
with h5py.File(path, "r") as f:
    offset = f["params/fc1.weight"].id.get_offset()
with open(path, "r+b") as f:
    f.seek(offset + 1000)
    byte = f.read(1)
    f.seek(offset + 1000)
    f.write(bytes([byte[0] ^ 0x10]))
PY
trellis_run 2 "${mlp[@]}" --ckpt.interval_steps=10 --run.dir="$WORK/flip" --resume auto > "$WORK/flip2.log" 2>&1
grep -q "step-0000020 is unusable" "$WORK/flip2.log" || fail "no warning about the corrupt checkpoint"
grep -q "resume: .*step-0000010" "$WORK/flip2.log" || fail "did not fall back to step 10"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 30 "$WORK/straight" "$WORK/flip"

# 3b. The newest checkpoint's `step` attribute edited to 999: its info_checksum no longer
#     matches, so --resume auto warns and falls back instead of resuming at step 999.
$py - "$WORK/flip/checkpoints/step-0000030/state.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["step"] = np.int64(999)
PY
trellis_run 2 "${mlp[@]}" --ckpt.interval_steps=10 --run.dir="$WORK/flip" --resume auto > "$WORK/step2.log" 2>&1
grep -q "step-0000030 is unusable.*info_checksum" "$WORK/step2.log" || fail "no warning about the edited step: $(grep resume "$WORK/step2.log")"
grep -q "resume: .*step-0000020" "$WORK/step2.log" || fail "did not fall back to step 20"

# 4. Rank 1 killed (SIGKILL) while the step-20 checkpoint is being written: the job ends,
#    step 10 stays the newest usable checkpoint, and the resumed run matches.
trellis_run 2 "${mlp[@]}" --ckpt.interval_steps=10 --fault.inject=1:20:kill_in_checkpoint --run.dir="$WORK/kill" > "$WORK/kill1.log" 2>&1 \
  && fail "the run with a killed rank exited 0"
[[ "$(cat "$WORK/kill/checkpoints/latest")" == step-0000010 ]] || fail "latest moved past step 10"
trellis_run 2 "${mlp[@]}" --ckpt.interval_steps=10 --run.dir="$WORK/kill" --resume auto > "$WORK/kill2.log"
grep -q "resume: .*step-0000010" "$WORK/kill2.log" || fail "did not resume from step 10 after the kill"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 30 "$WORK/straight" "$WORK/kill"

# 5. Another model's checkpoint: exit 3 naming the key, run.dir untouched.
cp "$WORK/pre/metrics.jsonl" "$WORK/metrics.before"
expect_exit 3 "$WORK/other.log" trellis_run 2 "${mlp[@]}" --model.hidden=64 --run.dir="$WORK/pre" --resume auto
grep -q "model.hidden" "$WORK/other.log" || fail "error does not name model.hidden: $(tail -3 "$WORK/other.log")"
cmp -s "$WORK/metrics.before" "$WORK/pre/metrics.jsonl" || fail "metrics.jsonl changed by a refused resume"

# 6. GPT across layouts: checkpoint at dp2 x tp2 x pp2 (ZeRO-1), resumed at dp2 and at 1 rank.
$py "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" --out-dir "$WORK/tokens" > /dev/null
gpt=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
     --data.test= --model.n_layer=2 --model.n_head=4 --model.d_model=32 --model.seq_len=32
     --model.dropout=0.1 --train.global_batch=8 --train.micro_batch=2 --train.max_steps=20
     --log.interval=1 --sched.warmup_steps=5 --ckpt.interval_steps=10)
trellis_run 1 "${gpt[@]}" --run.dir="$WORK/gpt-straight" > "$WORK/gpt-straight.log"
trellis_run 8 "${gpt[@]}" --parallel.tp=2 --parallel.pp=2 --parallel.zero=1 --fault.inject=0:10:signal --run.dir="$WORK/gpt" > "$WORK/gpt8.log" || true
[[ "$(cat "$WORK/gpt/checkpoints/latest")" == step-0000010 ]] || fail "no GPT checkpoint at step 10"
cp -r "$WORK/gpt" "$WORK/gpt-b"
trellis_run 2 "${gpt[@]}" --run.dir="$WORK/gpt" --resume auto > "$WORK/gpt2.log"
trellis_run 1 "${gpt[@]}" --run.dir="$WORK/gpt-b" --resume auto > "$WORK/gpt1.log"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/gpt-straight" "$WORK/gpt" "$WORK/gpt-b"
same_params "$WORK/gpt-straight/model.h5" "$WORK/gpt-b/model.h5" 1e-3

# 7. ZeRO-1 with small buckets (through the communicator: the shared-memory exchange has one
# bucket): fc1.weight spans many buckets, so each dp rank writes and reads its optimizer state
# as several ranges of one tensor (no rank gathers the state). Preempted at step 13 and resumed
# on the same layout: bitwise the straight run; resumed at dp2 without ZeRO-1, at 1 rank, and
# at dp4 with ZeRO-1 through node shared memory (one contiguous shard per rank): the same
# losses within 1e-5.
zero=(--parallel.zero=1 --parallel.bucket_mb=0.05 --parallel.grad_exchange=communicator)
trellis_run 4 "${mlp[@]}" "${zero[@]}" --run.dir="$WORK/zero-straight" > "$WORK/zero-straight.log"
expect_exit 75 "$WORK/zero-pre.log" trellis_run 4 "${mlp[@]}" "${zero[@]}" --fault.inject=2:13:signal --run.dir="$WORK/zero"
cp -r "$WORK/zero" "$WORK/zero-dp2"
cp -r "$WORK/zero" "$WORK/zero-dp1"
cp -r "$WORK/zero" "$WORK/zero-shared"
trellis_run 4 "${mlp[@]}" "${zero[@]}" --run.dir="$WORK/zero" --resume auto > "$WORK/zero-resume.log"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 30 "$WORK/zero-straight" "$WORK/zero"
same_params "$WORK/zero-straight/model.h5" "$WORK/zero/model.h5" 0
trellis_run 2 "${mlp[@]}" --run.dir="$WORK/zero-dp2" --resume auto > "$WORK/zero-dp2.log"
trellis_run 1 "${mlp[@]}" --run.dir="$WORK/zero-dp1" --resume auto > "$WORK/zero-dp1.log"
trellis_run 4 "${mlp[@]}" --parallel.zero=1 --parallel.grad_exchange=shared_memory --run.dir="$WORK/zero-shared" --resume auto > "$WORK/zero-shared.log"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 30 "$WORK/zero-straight" "$WORK/zero-dp2" "$WORK/zero-dp1" "$WORK/zero-shared"
echo "checkpoint and resume: ok"
