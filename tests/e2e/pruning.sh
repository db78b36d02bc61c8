#!/usr/bin/env bash
# Pruning during training (prune.*) and export of the structurally pruned model:
#   1. magnitude, per layer, 1 rank: the sparsity logged after each mask update follows the
#      cubic schedule, each weight has exactly round(s n) zeros, pruned weights and their
#      momentum stay zero from one checkpoint to the next; preempted mid-schedule and resumed,
#      the run continues bitwise;
#   2. the same masks on other layouts: tp = 2 from the start, and the 1-rank checkpoint of
#      step 20 resumed on dp = 2 with ZeRO-1 (losses within 1e-5, same zero sets);
#   3. global scope over pipeline stages (pp = 2 equals 1 rank; round(s N) zeros in all);
#   4. structured MLP neurons (1 rank and tp = 2 equal), exported smaller by
#      `trellis export --prune`, evaluated to the same loss and accuracy;
#   5. structured CNN block channels with their BatchNorm, exported and evaluated the same;
#   6. sparsity per layer in TensorBoard; bad prune keys refused.
source "$(dirname "$0")/common.sh"
py=$TRELLIS_PYTHON
schedule=(--prune.method=magnitude --prune.initial_sparsity=0.2 --prune.final_sparsity=0.9
          --prune.start_step=10 --prune.end_step=40 --prune.frequency=10)
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=60 --train.global_batch=64 --log.interval=1
     --ckpt.interval_steps=20 --model.hidden=128,64 "${schedule[@]}")

# check_zeros RUN KIND SPARSITY: every pruned tensor of RUN/model.h5 has round(s n) zeros
# (KIND layer), round(s N) over all (global), or round(s units) zero rows with their bias
# (units); pruned zeros of every checkpoint stay zero in the next, momentum included.
check_zeros() {
  $py - "$@" <<'PY'
import sys, glob, h5py, numpy as np
run, kind, s = sys.argv[1], sys.argv[2], float(sys.argv[3])
def weights(f):
    return {k: f["params"][k][()] for k in f["params"]
            if f["params"][k].ndim >= 2 and not k.startswith("embed")}
with h5py.File(run + "/model.h5") as f:
    w = weights(f)
    b = {k: f["params"][k][()] for k in f["params"] if k.endswith(".bias")}
if kind == "layer":
    for k, x in w.items():
        assert (x == 0).sum() == round(s * x.size), f"{k}: {(x == 0).sum()} zeros of {x.size}"
elif kind == "global":
    zeros, n = sum(int((x == 0).sum()) for x in w.values()), sum(x.size for x in w.values())
    assert zeros == round(s * n), f"{zeros} zeros of {n}, expected {round(s * n)}"
    print("global per layer:", {k: round(float((x == 0).mean()), 3) for k, x in w.items()})
else:  # units: rows of the hidden layers (not the head)
    for k, x in w.items():
        if k.startswith("head"):
            assert (x == 0).sum() == 0, f"{k} pruned"
            continue
        rows = np.all(x == 0, axis=1)
        assert rows.sum() == round(s * x.shape[0]), f"{k}: {rows.sum()} zero rows"
        assert np.all(b[k.replace("weight", "bias")][rows] == 0), f"{k}: bias of pruned rows"
        assert (x == 0).sum() == rows.sum() * x.shape[1], f"{k}: zeros outside pruned rows"
ckpts = sorted(glob.glob(run + "/checkpoints/step-*/state.h5"))
for a, c in zip(ckpts, ckpts[1:]):
    with h5py.File(a) as fa, h5py.File(c) as fc:
        for k in fa["masks"]:
            ma, mc = fa["masks"][k][()], fc["masks"][k][()]
            assert np.all(mc[ma == 0] == 0), f"{k}: a pruned weight came back in {c}"
            assert np.all(fc["params"][k][()][mc == 0] == 0), f"{k}: masked weight not zero"
            for state in fc["optim"]:
                assert np.all(fc["optim"][state][k][()][mc == 0] == 0), f"{k}: {state} not zero"
print(f"{run}: zeros as expected ({kind}, s = {s}), {len(ckpts)} checkpoints keep them")
PY
}
same_eval() {  # same_eval LOG_A LOG_B LOSS_RTOL ACCURACY_TOL WHAT: two evals agree
  $py - "$(eval_field "$1" loss)" "$(eval_field "$1" accuracy)" "$(eval_field "$2" loss)" \
    "$(eval_field "$2" accuracy)" "$3" "$4" "$5" <<'PY'
import sys
la, aa, lb, ab, rtol, atol = map(float, sys.argv[1:7])
assert abs(la - lb) <= rtol * la and abs(aa - ab) <= atol, f"{sys.argv[7]}: {la} {aa} vs {lb} {ab}"
print(f"{sys.argv[7]} evaluates the same: loss {la} vs {lb}, accuracy {aa} vs {ab}")
PY
}
same_zeros() {  # same_zeros A/model.h5 B/model.h5: the same weights are zero in both
  $py - "$@" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1]) as a, h5py.File(sys.argv[2]) as b:
    for k in a["params"]:
        za, zb = a["params"][k][()] == 0, b["params"][k][()] == 0
        assert np.array_equal(za, zb), f"{k}: {int((za != zb).sum())} zeros differ"
print(f"same zero sets: {sys.argv[1]} {sys.argv[2]}")
PY
}

# 1. Magnitude per layer on 1 rank.
trellis_run 1 "${mlp[@]}" --run.dir="$WORK/mag1" > "$WORK/mag1.log"
$py - "$WORK/mag1/metrics.jsonl" <<'PY'
import sys, json
rows = [r for r in map(json.loads, open(sys.argv[1])) if "sparsity" in r]
steps = [r["step"] for r in rows]
assert steps == [10, 20, 30, 40], f"mask updates at {steps}"
for r in rows:
    t = r["step"]
    want = 0.9 + (0.2 - 0.9) * (1 - (t - 10) / 30) ** 3
    assert abs(r["sparsity_target"] - want) < 1e-12, (t, r["sparsity_target"], want)
    assert abs(r["sparsity"] - want) < 1e-4, (t, r["sparsity"], want)
    assert set(r["sparsity_per_layer"]) == {"fc1.weight", "fc2.weight", "head.weight"}, r
    print(f"step {t}: target {want:.4f}, per layer", r["sparsity_per_layer"])
PY
check_zeros "$WORK/mag1" layer 0.9
grep -q "prune: step 40, sparsity 90.00%" "$WORK/mag1.log" || fail "no console line for step 40"
# Preempted at step 25 (between mask updates), resumed: bitwise the straight run.
expect_exit 75 "$WORK/pre.log" trellis_run 1 "${mlp[@]}" --fault.inject=0:25:signal --run.dir="$WORK/pre"
trellis_run 1 "${mlp[@]}" --run.dir="$WORK/pre" --resume auto > "$WORK/pre2.log"
grep -q "resume: .*step-0000025" "$WORK/pre2.log" || fail "did not resume from step 25"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 60 "$WORK/mag1" "$WORK/pre"
same_zeros "$WORK/mag1/model.h5" "$WORK/pre/model.h5"

# 2. Other layouts: tp = 2 from the start; step 20 of the 1-rank run resumed on dp 2 + ZeRO-1.
trellis_run 2 "${mlp[@]}" --parallel.tp=2 --run.dir="$WORK/tp2" > "$WORK/tp2.log"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 60 "$WORK/mag1" "$WORK/tp2"
same_zeros "$WORK/mag1/model.h5" "$WORK/tp2/model.h5"
mkdir -p "$WORK/zero/checkpoints"
cp -r "$WORK/mag1/checkpoints/step-0000020" "$WORK/zero/checkpoints/"
echo step-0000020 > "$WORK/zero/checkpoints/latest"
trellis_run 2 "${mlp[@]}" --parallel.zero=1 --run.dir="$WORK/zero" --resume auto > "$WORK/zero.log"
grep -q "resume: .*step-0000020" "$WORK/zero.log" || fail "ZeRO-1 run did not resume step 20"
check_zeros "$WORK/zero" layer 0.9
same_zeros "$WORK/mag1/model.h5" "$WORK/zero/model.h5"
$py - "$WORK/mag1/metrics.jsonl" "$WORK/zero/metrics.jsonl" <<'PY'
import sys, json
def losses(p):
    return {r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r and "step" in r}
a, b = losses(sys.argv[1]), losses(sys.argv[2])
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in range(21, 61))
assert worst <= 1e-5, f"steps 21-60 after the layout change differ by {worst}"
print(f"resumed on dp 2 + ZeRO-1: steps 21-60 within {worst:.2e} of the 1-rank run")
PY

# 3. Global threshold over pipeline stages.
glob=("${mlp[@]}" --prune.scope=global --ckpt.interval_steps=30)
trellis_run 1 "${glob[@]}" --run.dir="$WORK/glob1" > "$WORK/glob1.log"
trellis_run 2 "${glob[@]}" --parallel.pp=2 --run.dir="$WORK/glob_pp2" > "$WORK/glob_pp2.log"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 60 "$WORK/glob1" "$WORK/glob_pp2"
check_zeros "$WORK/glob1" global 0.9
same_zeros "$WORK/glob1/model.h5" "$WORK/glob_pp2/model.h5"

# 4. Structured MLP neurons: 1 rank and tp = 2; export; eval of both.
units=("${mlp[@]}" --prune.method=structured --prune.final_sparsity=0.5)
trellis_run 1 "${units[@]}" --run.dir="$WORK/st1" > "$WORK/st1.log"
trellis_run 2 "${units[@]}" --parallel.tp=2 --run.dir="$WORK/st_tp2" > "$WORK/st_tp2.log"
$py "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 60 "$WORK/st1" "$WORK/st_tp2"
check_zeros "$WORK/st1" units 0.5
same_zeros "$WORK/st1/model.h5" "$WORK/st_tp2/model.h5"
trellis_run 1 export --weights "$WORK/st1/model.h5" --out "$WORK/st1/small.h5" --prune > "$WORK/export.log"
grep -q "fc1.weight 128 -> 64, fc2.weight 64 -> 32" "$WORK/export.log" || fail "export: $(cat "$WORK/export.log")"
trellis_run 2 eval --weights "$WORK/st1/model.h5" --data "$FASHION_DIR/test.h5" > "$WORK/eval_big.log"
trellis_run 2 eval --weights "$WORK/st1/small.h5" --data "$FASHION_DIR/test.h5" > "$WORK/eval_small.log"
grep -q "mlp 784-64-32-10" "$WORK/eval_small.log" || fail "exported model: $(cat "$WORK/eval_small.log")"
same_eval "$WORK/eval_big.log" "$WORK/eval_small.log" 1e-5 0 "exported MLP"
[[ $(stat -c %s "$WORK/st1/small.h5") -lt $(stat -c %s "$WORK/st1/model.h5") ]] || fail "exported file not smaller"

# 5. Structured CNN block channels (with bn1), exported and evaluated the same.
cnn=(train --config "$TRELLIS_SRC/inputs/fashion_cnn.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=12 --train.global_batch=32 --log.interval=1
     --model.widths=8,16 --prune.method=structured --prune.final_sparsity=0.5
     --prune.start_step=4 --prune.end_step=8 --prune.frequency=2)
trellis_run 2 "${cnn[@]}" --run.dir="$WORK/cnn" > "$WORK/cnn.log"
trellis_run 1 export --weights "$WORK/cnn/model.h5" --out "$WORK/cnn/small.h5" --prune > "$WORK/cnn_export.log"
grep -q "stage1.block1.conv1.weight 8 -> 4, stage2.block1.conv1.weight 16 -> 8" "$WORK/cnn_export.log" \
  || fail "cnn export: $(cat "$WORK/cnn_export.log")"
trellis_run 1 eval --weights "$WORK/cnn/model.h5" --data "$FASHION_DIR/test.h5" --batch 500 > "$WORK/cnn_big.log"
trellis_run 1 eval --weights "$WORK/cnn/small.h5" --data "$FASHION_DIR/test.h5" --batch 500 > "$WORK/cnn_small.log"
grep -q "inner 4-8" "$WORK/cnn_small.log" || fail "exported cnn: $(cat "$WORK/cnn_small.log")"
same_eval "$WORK/cnn_big.log" "$WORK/cnn_small.log" 1e-4 2e-4 "exported CNN"

# 6. TensorBoard gets the per-layer sparsity; bad keys are refused with their names.
ls "$WORK/mag1"/events.out.tfevents.* > /dev/null || fail "no TensorBoard file"
grep -a -q "sparsity/fc1.weight" "$WORK/mag1"/events.out.tfevents.* || fail "no sparsity scalars in TensorBoard"
expect_exit 2 "$WORK/bad1.log" trellis_run 1 "${mlp[@]}" --prune.initial_sparsity=0.95 --run.dir="$WORK/bad"
grep -q "prune.final_sparsity" "$WORK/bad1.log" || fail "bad sparsities: $(tail -2 "$WORK/bad1.log")"
expect_exit 2 "$WORK/bad2.log" trellis_run 1 "${units[@]}" --prune.scope=global --run.dir="$WORK/bad"
grep -q "prune.scope = global" "$WORK/bad2.log" || fail "structured global: $(tail -2 "$WORK/bad2.log")"
expect_exit 2 "$WORK/bad3.log" trellis_run 1 export --weights "$WORK/st1/model.h5" --out "$WORK/x.h5"
grep -q "\-\-prune" "$WORK/bad3.log" || fail "export without --prune: $(tail -2 "$WORK/bad3.log")"
echo "pruning: all checks passed"
