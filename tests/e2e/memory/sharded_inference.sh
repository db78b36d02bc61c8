#!/usr/bin/env bash
# A model spread over the ranks for inference (train/commands/sharded_model.hpp): `trellis eval`
# with --zero 3, --tp 2, --pp 2 and --tp 2 --zero 3 gives the one-rank loss within 1e-5 while
# each rank holds less of the model; --memory-limit-gb refuses a layout that does not fit (one
# rank) and takes one that does (ZeRO-3 over 4); `trellis generate` spread with --zero 3 and
# --tp 2 writes the one-rank logits (within 1e-5) and greedy text; the refusals.
source "$(dirname "$0")/../common.sh"
source "$(dirname "$0")/small_decoder.sh"
py=$TRELLIS_PYTHON
# 16 blocks: ZeRO-3 keeps two blocks' slots and a quarter of the rest on each of 4 ranks.
run model 1 "${gpt[@]}" --model.n_layer=16 --model.d_model=128 --train.max_steps=2
weights="$WORK/model/model.h5"
data="$WORK/tokens/val.h5"

# eval NAME NP ARGS...: `trellis eval` of the model into $WORK/NAME.log, which must succeed.
eval_run() {
  local name=$1 np=$2
  shift 2
  trellis_run "$np" eval --weights "$weights" --data "$data" "$@" \
    > "$WORK/$name.log" 2>&1 || fail "eval $name: $(tail -5 "$WORK/$name.log")"
}
eval_run one 1 --batch 4
eval_run z3 4 --batch 4 --zero 3
eval_run tp2 2 --batch 4 --tp 2
eval_run pp2 2 --batch 4 --pp 2
eval_run tp2-z3 4 --batch 4 --tp 2 --zero 3
"$py" - "$WORK" <<'PY' || fail "sharded eval differs from one rank's"
import re, sys
work = sys.argv[1]
def result(name):
    text = open(f"{work}/{name}.log").read()
    m = re.search(r"samples, loss ([0-9.]+), accuracy ([0-9.]+).*peak memory ([0-9.]+) (KiB|MiB|GiB) "
                  r"per rank \(parameters ([0-9.]+) (KiB|MiB|GiB)", text)
    assert m, f"{name}: no eval line in\n{text}"
    unit = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
    return float(m[1]), float(m[2]), float(m[3]) * unit[m[4]], float(m[5]) * unit[m[6]]
one = result("one")
print(f"one rank: loss {one[0]:.6f}, peak {one[2] / 2**20:.2f} MiB, parameters {one[3] / 2**20:.2f} MiB")
for name in ["z3", "tp2", "pp2", "tp2-z3"]:
    r = result(name)
    print(f"{name}: loss {r[0]:.6f}, peak {r[2] / 2**20:.2f} MiB, parameters {r[3] / 2**20:.2f} MiB")
    assert abs(r[0] - one[0]) <= 1e-5 * one[0], (name, r[0], one[0])
    assert abs(r[1] - one[1]) <= 1e-6, (name, r[1], one[1])
    # Every layout holds at most ~60% of the whole model's parameters on its largest rank.
    assert r[3] < 0.6 * one[3], (name, "parameters", r[3], one[3])
PY

# A limit between the two layouts' plans (batch 1: the parameters' share of the plan is large):
# one rank is refused, naming --zero; ZeRO-3 over 4 ranks fits and gives the same loss.
eval_run plan-one 1 --batch 1 --memory-limit-gb 1000
eval_run plan-z3 4 --batch 1 --zero 3 --memory-limit-gb 1000
limit=$("$py" - "$WORK" <<'PY'
import re, sys
def plan(name):
    text = open(f"{sys.argv[1]}/{name}.log").read()
    m = re.search(r"memory plan: ([0-9.]+) (KiB|MiB|GiB) per rank", text)
    assert m, f"{name}: no memory plan in\n{text}"
    return float(m[1]) * {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m[2]]
one, z3 = plan("plan-one"), plan("plan-z3")
assert z3 < 0.8 * one, ("ZeRO-3's plan is not smaller", one, z3)
print(f"{(one + z3) / 2 / 2**30:.9f}")
PY
) || fail "no limit between the plans"
expect_exit 2 "$WORK/refused.log" trellis_run 1 eval --weights "$weights" --data "$data" \
  --batch 1 --memory-limit-gb "$limit"
grep -q -- "--memory-limit-gb [0-9.e-]*: a rank needs .* would help: --zero 3" "$WORK/refused.log" \
  || fail "the refusal names neither the limit nor --zero: $(tail -3 "$WORK/refused.log")"
eval_run fits 4 --batch 1 --zero 3 --memory-limit-gb "$limit"
eval_run fits-one 1 --batch 1
"$py" - "$WORK" <<'PY' || fail "the run that fits under the limit differs"
import re, sys
loss = [float(re.search(r"samples, loss ([0-9.]+)", open(f"{sys.argv[1]}/{n}.log").read())[1])
        for n in ("fits-one", "fits")]
assert abs(loss[0] - loss[1]) <= 1e-5 * loss[0], loss
PY

# generate spread over the ranks: the prompt's logits and the greedy text of one rank.
gen() {
  local name=$1 np=$2
  shift 2
  trellis_run "$np" generate --weights "$weights" --prompt "The licenses" --tokens 12 \
    --temperature 0 --logits "$WORK/$name.npy" "$@" > "$WORK/$name.log" 2>&1 \
    || fail "generate $name: $(tail -5 "$WORK/$name.log")"
  tail -1 "$WORK/$name.log" > "$WORK/$name.txt"
}
gen gen-one 1 --no-cache
gen gen-z3 4 --zero 3
gen gen-tp2 2 --tp 2
gen gen-tp2-z3 4 --tp 2 --zero 3
for name in gen-z3 gen-tp2 gen-tp2-z3; do
  cmp -s "$WORK/gen-one.txt" "$WORK/$name.txt" \
    || fail "$name wrote other text: $(cat "$WORK/$name.txt") vs $(cat "$WORK/gen-one.txt")"
done
"$py" - "$WORK" <<'PY' || fail "spread generate logits differ"
import sys, numpy as np
ref = np.load(f"{sys.argv[1]}/gen-one.npy")
for name in ("gen-z3", "gen-tp2", "gen-tp2-z3"):
    got = np.load(f"{sys.argv[1]}/{name}.npy")
    assert got.shape == ref.shape and np.allclose(got, ref, rtol=1e-5, atol=1e-5), name
PY

# Refusals, on every rank, naming the option.
expect_exit 2 "$WORK/gen-pp.log" trellis_run 2 generate --weights "$weights" --pp 2
grep -q "generate --pp 2" "$WORK/gen-pp.log" || fail "generate --pp: $(tail -3 "$WORK/gen-pp.log")"
expect_exit 2 "$WORK/eval-tp3.log" trellis_run 2 eval --weights "$weights" --data "$data" --tp 3
grep -q "tp" "$WORK/eval-tp3.log" || fail "eval --tp 3 on 2 ranks: $(tail -3 "$WORK/eval-tp3.log")"
echo "sharded inference: OK"
