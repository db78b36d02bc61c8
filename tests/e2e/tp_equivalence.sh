#!/usr/bin/env bash
# Tensor-parallel equivalence: the MLP and the GPT trained for 20 steps on tp2, tp4 and
# dp2 x tp2 give the same loss at every step as the single-rank run, within 1e-5 relative,
# with dropout on (masks drawn at logical positions) and gradient clipping (the global norm
# counts replicated parameters once). The GPT's vocabulary-parallel loss also evaluates to the
# same validation loss, and its model.h5 (logical tensors gathered over tp) generates text.
source "$(dirname "$0")/common.sh"

mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.max_steps=20 --train.global_batch=64 --log.interval=1
     --model.dropout=0.1 --optim.clip_norm=0.5 --sched.warmup_steps=5)
trellis_run 1 "${mlp[@]}" --train.micro_batch=16 --run.dir="$WORK/mlp1" > "$WORK/mlp1.log"
trellis_run 2 "${mlp[@]}" --parallel.tp=2 --run.dir="$WORK/mlp-tp2" > "$WORK/mlp-tp2.log"
trellis_run 4 "${mlp[@]}" --parallel.tp=4 --train.micro_batch=32 --run.dir="$WORK/mlp-tp4" > "$WORK/mlp-tp4.log"
trellis_run 4 "${mlp[@]}" --parallel.tp=2 --run.dir="$WORK/mlp-dp2tp2" > "$WORK/mlp-dp2tp2.log"
# An odd number of hidden layers ends in a row-parallel head.
trellis_run 1 "${mlp[@]}" --model.hidden=64,32,16 --run.dir="$WORK/mlp3-1" > "$WORK/mlp3-1.log"
trellis_run 2 "${mlp[@]}" --model.hidden=64,32,16 --parallel.tp=2 --run.dir="$WORK/mlp3-tp2" > "$WORK/mlp3-tp2.log"
/usr/bin/python3 "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/mlp1" \
  "$WORK/mlp-tp2" "$WORK/mlp-tp4" "$WORK/mlp-dp2tp2"
/usr/bin/python3 "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/mlp3-1" "$WORK/mlp3-tp2"

/usr/bin/python3 "$TRELLIS_SRC/tools/text_to_tokens.py" --src /usr/share/common-licenses/GPL-3 \
  --out-dir "$WORK/tokens" > /dev/null
gpt=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
     --data.test="$WORK/tokens/val.h5" --model.n_layer=2 --model.n_head=4 --model.d_model=32
     --model.seq_len=32 --model.dropout=0.1 --train.global_batch=8 --train.max_steps=20
     --train.eval_interval=0 --train.eval_batch=8 --train.eval_max_samples=64 --log.interval=1
     --sched.warmup_steps=5)
trellis_run 1 "${gpt[@]}" --train.micro_batch=4 --run.dir="$WORK/gpt1" > "$WORK/gpt1.log"
trellis_run 2 "${gpt[@]}" --parallel.tp=2 --run.dir="$WORK/gpt-tp2" > "$WORK/gpt-tp2.log"
trellis_run 4 "${gpt[@]}" --parallel.tp=4 --train.micro_batch=2 --run.dir="$WORK/gpt-tp4" > "$WORK/gpt-tp4.log"
trellis_run 4 "${gpt[@]}" --parallel.tp=2 --run.dir="$WORK/gpt-dp2tp2" > "$WORK/gpt-dp2tp2.log"
trellis_run 4 "${gpt[@]}" --parallel.tp=2 --parallel.zero=1 --parallel.bucket_mb=0.01 --run.dir="$WORK/gpt-dp2tp2-zero1" > "$WORK/gpt-dp2tp2-zero1.log"
/usr/bin/python3 "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/gpt1" \
  "$WORK/gpt-tp2" "$WORK/gpt-tp4" "$WORK/gpt-dp2tp2" "$WORK/gpt-dp2tp2-zero1"

# Memory: parameters and optimizer state per rank shrink with tp (all but the replicated
# LayerNorms, biases and position table are split) and with ZeRO-1 (state split over dp).
/usr/bin/python3 - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
s = {r: json.load(open(f"{w}/{r}/summary.json")) for r in ["gpt1", "gpt-tp2", "gpt-tp4", "gpt-dp2tp2", "gpt-dp2tp2-zero1"]}
total = s["gpt1"]["parameters"]
assert all(v["parameters"] == total for v in s.values()), "logical parameter count depends on the layout"
p1, p2, p4 = (s[r]["parameters_per_rank"] for r in ["gpt1", "gpt-tp2", "gpt-tp4"])
assert p1 == total and 0.5 * p1 < p2 < 0.56 * p1 and 0.25 * p1 < p4 < 0.31 * p1, (p1, p2, p4)
o = {r: s[r]["optimizer_state_floats_per_rank"] for r in s}
assert abs(o["gpt-dp2tp2-zero1"] * 2 - o["gpt-dp2tp2"]) <= 0, o
print(f"parameters per rank: {p1} (1 rank), {p2} (tp2), {p4} (tp4); optimizer state "
      f"{o['gpt-dp2tp2']} -> {o['gpt-dp2tp2-zero1']} floats with ZeRO-1 over dp2")
PY
/usr/bin/python3 - "$WORK/gpt1" "$WORK/gpt-tp4" <<'PY'
import json, sys
def val(run):
    return [json.loads(l)["test_loss"] for l in open(run + "/metrics.jsonl") if "test_loss" in l][-1]
a, b = val(sys.argv[1]), val(sys.argv[2])
assert abs(a - b) <= 1e-5 * abs(a), f"validation loss {b} at tp4 vs {a} at 1 rank"
print(f"validation loss {a:.6f} (1 rank) vs {b:.6f} (tp4)")
PY
trellis_run 1 generate --weights "$WORK/gpt-tp4/model.h5" --prompt "The " --tokens 20 --seed 3 > "$WORK/gen.txt"
[[ $(wc -c < "$WORK/gen.txt") -ge 20 ]] || fail "generate from tp4 weights printed too little"

# Layouts that cannot work are refused before any work, naming the key.
expect_config_error() {
  local np=$1 key=$2
  shift 2
  if trellis_run "$np" "$@" --run.dir="$WORK/bad" > "$WORK/bad.log" 2>&1; then
    fail "expected a configuration error naming $key: $*"
  fi
  grep -q "$key" "$WORK/bad.log" || fail "error does not name $key: $(cat "$WORK/bad.log")"
}
expect_config_error 2 parallel.tp "${gpt[@]}" --parallel.tp=2 --model.n_head=3 --model.d_model=24
expect_config_error 4 parallel.tp "${mlp[@]}" --parallel.tp=3
expect_config_error 2 parallel.tp train --config "$TRELLIS_SRC/inputs/fashion_cnn.ini" \
  --data.train="$FASHION_DIR/train.h5" --data.test= --parallel.tp=2
echo "tensor-parallel equivalence: ok"
