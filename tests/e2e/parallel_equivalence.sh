#!/usr/bin/env bash
# Hybrid-parallel equivalence: the MLP and the GPT trained for 20 steps on every 4-rank layout
# (dp4, tp4, pp4, dp2 x tp2, dp2 x pp2, tp2 x pp2) and on dp2 x tp2 x pp2 (8 ranks,
# oversubscribed) give the same loss at every step as the single-rank run, within 1e-5
# relative. Dropout is on (masks drawn at logical positions), gradients are clipped (the
# global norm counts replicated and tied parameters once), micro-batches differ between runs.
# GPipe and 1F1B, ZeRO-1 on and off, overlapped and blocking reduction, the gradient exchange
# through the communicator and through node shared memory agree too. The saved
# model.h5 (logical tensors gathered over tp and pp) evaluates and generates.
source "$(dirname "$0")/common.sh"
compare() { "$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$@"; }

# layouts NAME_PREFIX ARGS...: the reference and every layout, for one model.
layouts() {
  local name=$1
  shift
  trellis_run 1 "$@" --train.micro_batch=4 --run.dir="$WORK/$name-1" > "$WORK/$name-1.log"
  trellis_run 4 "$@" --run.dir="$WORK/$name-dp4" > "$WORK/$name-dp4.log"
  trellis_run 4 "$@" --parallel.tp=4 --run.dir="$WORK/$name-tp4" > "$WORK/$name-tp4.log"
  trellis_run 4 "$@" --parallel.pp=4 --train.micro_batch=2 --run.dir="$WORK/$name-pp4" > "$WORK/$name-pp4.log"
  trellis_run 4 "$@" --parallel.pp=4 --train.micro_batch=2 --parallel.schedule=gpipe --run.dir="$WORK/$name-pp4-gpipe" > "$WORK/$name-pp4g.log"
  trellis_run 4 "$@" --parallel.tp=2 --run.dir="$WORK/$name-dp2tp2" > "$WORK/$name-dp2tp2.log"
  trellis_run 4 "$@" --parallel.pp=2 --train.micro_batch=1 --run.dir="$WORK/$name-dp2pp2" > "$WORK/$name-dp2pp2.log"
  trellis_run 4 "$@" --parallel.pp=2 --parallel.zero=1 --parallel.bucket_mb=0.01 --parallel.grad_exchange=communicator --run.dir="$WORK/$name-dp2pp2-zero1" > "$WORK/$name-dp2pp2z.log"
  local shm=()
  if $SHARED_MEMORY_EXCHANGE; then
    trellis_run 4 "$@" --parallel.pp=2 --parallel.zero=1 --parallel.grad_exchange=shared_memory --run.dir="$WORK/$name-dp2pp2-zero1-shm" > "$WORK/$name-dp2pp2zs.log"
    shm=("$WORK/$name-dp2pp2-zero1-shm")
  fi
  trellis_run 4 "$@" --parallel.tp=2 --parallel.pp=2 --train.micro_batch=2 --parallel.overlap=false --run.dir="$WORK/$name-tp2pp2" > "$WORK/$name-tp2pp2.log"
  trellis_run 8 "$@" --parallel.tp=2 --parallel.pp=2 --train.micro_batch=2 --parallel.zero=1 --run.dir="$WORK/$name-dp2tp2pp2" > "$WORK/$name-dp2tp2pp2.log"
  compare "$WORK/$name-1" "$WORK/$name-dp4" "$WORK/$name-tp4" "$WORK/$name-pp4" \
    "$WORK/$name-pp4-gpipe" "$WORK/$name-dp2tp2" "$WORK/$name-dp2pp2" "$WORK/$name-dp2pp2-zero1" \
    "${shm[@]}" "$WORK/$name-tp2pp2" "$WORK/$name-dp2tp2pp2"
}

# MLP 784-64-32-16-10: 4 pipeline units (one per Linear), widths divisible by 4.
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test="$FASHION_DIR/test.h5" --train.eval_max_samples=512
     --model.hidden=64,32,16 --train.max_steps=20 --train.global_batch=16
     --log.interval=1 --model.dropout=0.1 --optim.clip_norm=0.5 --sched.warmup_steps=5)
layouts mlp "${mlp[@]}"
# An even number of hidden layers ends in a replicated head (tp), and explicit stage sizes.
trellis_run 1 "${mlp[@]}" --model.hidden=64,32 --run.dir="$WORK/mlp2-1" > "$WORK/mlp2-1.log"
trellis_run 4 "${mlp[@]}" --model.hidden=64,32 --parallel.tp=2 --parallel.pp=2 --parallel.stages=1,2 --run.dir="$WORK/mlp2-tp2pp2" > "$WORK/mlp2-tp2pp2.log"
compare "$WORK/mlp2-1" "$WORK/mlp2-tp2pp2"

# GPT L2 (4 units: embeddings, 2 blocks, head) on the GPL text as byte tokens.
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" \
  --out-dir "$WORK/tokens" > /dev/null
gpt=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
     --data.test="$WORK/tokens/val.h5" --model.n_layer=2 --model.n_head=4 --model.d_model=32
     --model.seq_len=32 --model.dropout=0.1 --train.global_batch=8 --train.max_steps=20
     --train.eval_interval=0 --train.eval_batch=8 --train.eval_max_samples=64 --log.interval=1
     --sched.warmup_steps=5)
layouts gpt "${gpt[@]}"

# The same validation loss through every layout's evaluation path (vocabulary-parallel loss,
# pipeline forward), and the same parameter count.
"$TRELLIS_PYTHON" - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
def last_eval(run):
    return [json.loads(l) for l in open(f"{w}/{run}/metrics.jsonl") if "test_loss" in l][-1]["test_loss"]
for model in ["mlp", "gpt"]:
    ref = last_eval(f"{model}-1")
    total = json.load(open(f"{w}/{model}-1/summary.json"))["parameters"]
    for layout in ["dp4", "tp4", "pp4", "dp2tp2", "dp2pp2", "tp2pp2", "dp2tp2pp2"]:
        run = f"{model}-{layout}"
        got = last_eval(run)
        assert abs(got - ref) <= 1e-5 * abs(ref), f"{run}: validation loss {got} vs {ref}"
        assert json.load(open(f"{w}/{run}/summary.json"))["parameters"] == total, run
    print(f"{model}: validation loss {ref:.6f} on every layout, {total} parameters")
PY

# Memory: rank 0's parameters and optimizer state shrink with tp, pp and ZeRO-1.
"$TRELLIS_PYTHON" - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
s = lambda run: json.load(open(f"{w}/{run}/summary.json"))
total = s("gpt-1")["parameters"]
p = {r: s(f"gpt-{r}")["parameters_per_rank"] for r in ["1", "tp4", "pp4", "dp2tp2", "tp2pp2"]}
assert p["1"] == total and p["tp4"] < 0.31 * total and p["dp2tp2"] < 0.56 * total, p
assert p["pp4"] < 0.5 * total and p["tp2pp2"] < 0.7 * p["dp2tp2"], p
o = {r: s(f"gpt-{r}")["optimizer_state_floats_per_rank"] for r in ["dp2pp2", "dp2pp2-zero1"]}
assert o["dp2pp2-zero1"] * 2 == o["dp2pp2"], o
print(f"parameters on rank 0: {p}; optimizer state {o['dp2pp2']} -> {o['dp2pp2-zero1']} floats with ZeRO-1 over dp2")
PY

# model.h5 holds the whole model whatever wrote it: it generates text at one rank.
trellis_run 1 generate --weights "$WORK/gpt-dp2tp2pp2/model.h5" --prompt "The " --tokens 20 --seed 3 > "$WORK/gen.txt"
[[ $(wc -c < "$WORK/gen.txt") -ge 20 ]] || fail "generate from dp2 x tp2 x pp2 weights printed too little"

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
expect_config_error 4 parallel.pp "${gpt[@]}" --parallel.pp=4 --model.n_layer=1
expect_config_error 2 parallel.stages "${mlp[@]}" --parallel.pp=2 --parallel.stages=1,1
expect_config_error 2 parallel.schedule "${mlp[@]}" --parallel.pp=2 --parallel.schedule=zb
echo "parallel equivalence: ok"
