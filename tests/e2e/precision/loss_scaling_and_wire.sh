#!/usr/bin/env bash
# fp16 loss scaling and the compressed gradient wire (parallel.grad_dtype, PowerSGD):
#  1. fp16 with dynamic loss scaling: overflows are skipped, counted and back the scale off;
#     a run preempted mid-way and resumed continues bitwise-identically, loss scale included;
#  2. a bf16 gradient wire on 2 ranks tracks the fp32 exchange, sends half the bytes, and
#     is refused with the shared-memory exchange;
#  3. PowerSGD rank 4 on 2 ranks: test accuracy within 1 point, >= 10x fewer bytes; its state
#     resumes bitwise on the same layout and restarts (with a warning) on another.
source "$(dirname "$0")/common.sh"

# 1. fp16 loss scaling: a first scale far too large overflows until it has backed off; a short
# growth interval makes it grow and overflow again. Preempted at step 23 and resumed: bitwise.
fp16=(train "${mlp[@]}" --data.test= --train.max_steps=60 --train.global_batch=64 --log.interval=1
      --precision.mode=fp16 --precision.initial_scale=1e12 --precision.growth_interval=6
      --precision.hysteresis=2)
trellis_run 2 "${fp16[@]}" --run.dir="$WORK/fp16-straight" > "$WORK/fp16-straight.log"
grep -q "step 1: gradients overflowed at loss scale 1e+12, step skipped; scale now 1e+12" \
  "$WORK/fp16-straight.log" || fail "no overflow at step 1 (hysteresis keeps the scale)"
grep -q "step 2: gradients overflowed at loss scale 1e+12, step skipped; scale now 5e+11" \
  "$WORK/fp16-straight.log" || fail "no back-off at step 2"
rc=0
trellis_run 2 "${fp16[@]}" --fault.inject=1:23:signal --run.dir="$WORK/fp16-pre" > "$WORK/fp16-pre.log" 2>&1 || rc=$?
[[ $rc -eq 75 ]] || fail "preempted fp16 run exited $rc, expected 75"
trellis_run 2 "${fp16[@]}" --run.dir="$WORK/fp16-pre" --resume auto > "$WORK/fp16-resume.log"
grep -q "resume: .*step-0000023" "$WORK/fp16-resume.log" || fail "did not resume from step 23"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 60 "$WORK/fp16-straight" "$WORK/fp16-pre"
"$py" - "$WORK/fp16-straight" "$WORK/fp16-pre" <<'PY'
import json, sys
def scales(d):
    return {r["step"]: (r["loss_scale"], r["overflow_steps"], r["skipped_steps"])
            for r in map(json.loads, open(d + "/metrics.jsonl")) if "loss_scale" in r}
a, b = scales(sys.argv[1]), scales(sys.argv[2])
assert a == b, "loss scale histories differ after resume"
grown = [s for s in sorted(a)[1:] if a[s][0] > a[s - 1][0]]
assert a[60][1] > 2 and grown, f"expected overflows and growth: {a[60]}, grown at {grown}"
print(f"fp16: {a[60][1]} overflow steps, scale grew at steps {grown[:5]}..., final scale {a[60][0]:g}; "
      "identical after resume")
PY

# 2. The bf16 wire on 2 ranks: the fp32 exchange's curve, half the bytes.
wire=(train "${mlp[@]}" --data.test= --train.max_steps=300 --log.interval=1 --parallel.grad_exchange=communicator)
trellis_run 2 "${wire[@]}" --run.dir="$WORK/wire-fp32" > "$WORK/wire-fp32.log"
trellis_run 2 "${wire[@]}" --parallel.grad_dtype=bf16 --run.dir="$WORK/wire-bf16" > "$WORK/wire-bf16.log"
grep -q "gradient exchange: communicator, .*bf16 on the wire" "$WORK/wire-bf16.log" || fail "no bf16 wire"
"${compare[@]}" --rtol 0.01 "$WORK/wire-fp32" "$WORK/wire-bf16"
"$py" - "$WORK/wire-fp32" "$WORK/wire-bf16" <<'PY'
import json, sys
last = [[r for r in map(json.loads, open(d + "/metrics.jsonl")) if "grad_wire_bytes" in r][-1] for d in sys.argv[1:]]
assert last[1]["grad_wire_bytes"] * 2 == last[0]["grad_wire_bytes"] > 0, last
assert last[1]["grad_compression"] == 2 and last[0]["grad_compression"] == 1
print(f"gradient bytes per step per rank: fp32 {last[0]['grad_wire_bytes']:.0f}, bf16 {last[1]['grad_wire_bytes']:.0f}")
PY
rc=0
trellis_run 2 "${wire[@]}" --parallel.grad_dtype=bf16 --parallel.grad_exchange=shared_memory \
  --run.dir="$WORK/wire-shared" > "$WORK/wire-shared.log" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "parallel.grad_dtype = bf16 needs communicator" "$WORK/wire-shared.log" \
  || fail "shared memory with a bf16 wire was not refused: $(tail -2 "$WORK/wire-shared.log")"
# 3. PowerSGD rank 4 on the MLP, 2 ranks, 3 epochs: test accuracy within 1 point of the
# uncompressed exchange, at least 10x fewer gradient bytes per step.
ps=(train "${mlp[@]}" --data.test="$FASHION_DIR/test.h5" --parallel.grad_exchange=communicator)
trellis_run 2 "${ps[@]}" --run.dir="$WORK/ps-off" > "$WORK/ps-off.log"
trellis_run 2 "${ps[@]}" --parallel.powersgd_rank=4 --run.dir="$WORK/ps-4" > "$WORK/ps-4.log"
grep -q "PowerSGD rank 4 from step 100" "$WORK/ps-4.log" || fail "PowerSGD not in the exchange line"
"$py" - "$WORK/ps-off" "$WORK/ps-4" <<'PY'
import json, sys
def run(d):
    rows = [json.loads(l) for l in open(d + "/metrics.jsonl")]
    acc = [r["test_accuracy"] for r in rows if "test_accuracy" in r][-1]
    last = [r for r in rows if "grad_wire_bytes" in r][-1]
    return acc, last["grad_wire_bytes"], last["grad_compression"]
(a0, b0, _), (a4, b4, c4) = run(sys.argv[1]), run(sys.argv[2])
print(f"PowerSGD rank 4: test accuracy {100 * a4:.2f}% vs {100 * a0:.2f}% uncompressed; "
      f"{b4:.0f} vs {b0:.0f} gradient bytes per step ({c4:.1f}x fewer)")
assert abs(a4 - a0) <= 0.01, "PowerSGD accuracy more than 1 point off"
assert b0 >= 10 * b4 and c4 >= 10, "PowerSGD sends less than 10x fewer bytes"
PY
# PowerSGD's error feedback and Q are in checkpoints: preempted at step 23 and resumed on the
# same layout, bitwise the uninterrupted run; resumed on 1 rank, restarted with a warning.
psr=(train "${mlp[@]}" --data.test= --train.max_steps=40 --train.global_batch=64 --log.interval=1
     --parallel.grad_exchange=communicator --parallel.powersgd_rank=2 --parallel.powersgd_start_step=5)
trellis_run 2 "${psr[@]}" --run.dir="$WORK/psr-straight" > "$WORK/psr-straight.log"
rc=0
trellis_run 2 "${psr[@]}" --fault.inject=1:23:signal --run.dir="$WORK/psr" > "$WORK/psr-pre.log" 2>&1 || rc=$?
[[ $rc -eq 75 ]] || fail "preempted PowerSGD run exited $rc, expected 75"
trellis_run 2 "${psr[@]}" --run.dir="$WORK/psr" --resume auto > "$WORK/psr-resume.log"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 40 "$WORK/psr-straight" "$WORK/psr"
cp -r "$WORK/psr/checkpoints" "$WORK/psr1-checkpoints"
trellis_run 1 "${psr[@]}" --ckpt.dir="$WORK/psr1-checkpoints" --run.dir="$WORK/psr1" --resume auto \
  > "$WORK/psr1.log" 2>&1
grep -q "holds no PowerSGD state for this layout" "$WORK/psr1.log" || fail "no PowerSGD restart warning"
echo "loss scaling and compressed exchange: all checks passed"
