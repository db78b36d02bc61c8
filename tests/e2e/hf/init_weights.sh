#!/usr/bin/env bash
# init.weights (docs/hugging-face.md): a new run starts from a weights file's parameters on any
# layout. A small Llama (GQA, untied) trained 10 steps goes through the Hugging Face bridge
# (export --format hf, import) without transformers; runs starting from the imported file with
# optim.lr = 0 on one rank, dp2 with ZeRO-1, tp2, pp2 and tp2 x pp2 write a model.h5 equal to it
# tensor for tensor and log the same losses (the trained model's, far below a fresh start's);
# a tied GPT-2 on pp2 (its last stage holds the token table's copy for the head) too. A run
# whose model.* keys describe another model is refused naming the key (exit 2).
source "$(dirname "$0")/../common.sh"
compare() { "$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps "$@"; }
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" \
  --out-dir "$WORK/tokens" > /dev/null
base=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
      --data.test="$WORK/tokens/val.h5" --model.n_layer=2 --model.n_head=4 --model.d_model=32
      --model.seq_len=32 --train.global_batch=8 --train.eval_interval=0 --train.eval_batch=8
      --train.eval_max_samples=64 --log.interval=1 --sched.warmup_steps=0)
llama=(--model.type=llama --model.n_kv_head=2 --model.d_ff=48)

# same_params A.h5 B.h5: every /params dataset of A equals B's exactly.
same_params() {
  "$TRELLIS_PYTHON" - "$1" "$2" << 'PY' || fail "$2 does not hold the parameters of $1"
import sys, h5py, numpy as np
a, b = (h5py.File(p, "r")["params"] for p in sys.argv[1:])
def tensors(group):
    names = []
    group.visit(lambda n: names.append(n) if isinstance(group[n], h5py.Dataset) else None)
    return sorted(names)
names = tensors(a)
assert names and names == tensors(b), (names, tensors(b))
for n in names:
    assert np.array_equal(a[n][...], b[n][...]), n
print(f"{sys.argv[2]}: {len(names)} tensors equal to {sys.argv[1]}")
PY
}

trellis_run 1 "${base[@]}" "${llama[@]}" --train.max_steps=10 --run.dir="$WORK/src" > "$WORK/src.log"
"$TRELLIS_BIN" export --format hf --weights "$WORK/src/model.h5" --out "$WORK/hf" > "$WORK/export.log"
"$TRELLIS_BIN" import --hf "$WORK/hf" --out "$WORK/start.h5" > "$WORK/import.log"
same_params "$WORK/src/model.h5" "$WORK/start.h5"

frozen=(--init.weights="$WORK/start.h5" --optim.lr=0 --sched.type=constant --train.max_steps=3)
trellis_run 1 "${base[@]}" "${llama[@]}" "${frozen[@]}" --run.dir="$WORK/1" > "$WORK/1.log"
grep -q "init.weights: parameters from" "$WORK/1.log" || fail "init.weights not read: $(tail -3 "$WORK/1.log")"
trellis_run 2 "${base[@]}" "${llama[@]}" "${frozen[@]}" --parallel.zero=1 --run.dir="$WORK/dp2z" > "$WORK/dp2z.log"
trellis_run 2 "${base[@]}" "${llama[@]}" "${frozen[@]}" --parallel.tp=2 --run.dir="$WORK/tp2" > "$WORK/tp2.log"
trellis_run 2 "${base[@]}" "${llama[@]}" "${frozen[@]}" --parallel.pp=2 --train.micro_batch=2 \
  --run.dir="$WORK/pp2" > "$WORK/pp2.log"
trellis_run 4 "${base[@]}" "${llama[@]}" "${frozen[@]}" --parallel.tp=2 --parallel.pp=2 \
  --train.micro_batch=2 --run.dir="$WORK/tp2pp2" > "$WORK/tp2pp2.log"
for run in 1 dp2z tp2 pp2 tp2pp2; do same_params "$WORK/start.h5" "$WORK/$run/model.h5"; done
compare 3 "$WORK/1" "$WORK/dp2z" "$WORK/tp2" "$WORK/pp2" "$WORK/tp2pp2"
# The trained model's loss, not a fresh start's (about ln 256 = 5.5 for bytes).
trellis_run 1 "${base[@]}" "${llama[@]}" --optim.lr=0 --sched.type=constant --train.max_steps=3 --run.dir="$WORK/fresh" > "$WORK/fresh.log"
"$TRELLIS_PYTHON" - "$WORK/1/metrics.jsonl" "$WORK/fresh/metrics.jsonl" << 'PY' || fail "init.weights run does not start from the trained model"
import json, sys
first = [json.loads(open(p).readline())["loss"] for p in sys.argv[1:]]
print(f"step-1 loss from init.weights {first[0]:.4f}, from a fresh start {first[1]:.4f}")
assert first[0] < first[1] - 0.3
PY

# A tied GPT-2 on pp2: the head's copy of wte on the last stage is read too (the losses say).
gpt=(--model.type=gpt)
trellis_run 1 "${base[@]}" "${gpt[@]}" --train.max_steps=5 --run.dir="$WORK/gsrc" > "$WORK/gsrc.log"
gfrozen=(--init.weights="$WORK/gsrc/model.h5" --optim.lr=0 --sched.type=constant --train.max_steps=3)
trellis_run 1 "${base[@]}" "${gpt[@]}" "${gfrozen[@]}" --run.dir="$WORK/g1" > "$WORK/g1.log"
trellis_run 2 "${base[@]}" "${gpt[@]}" "${gfrozen[@]}" --parallel.pp=2 --train.micro_batch=2 \
  --run.dir="$WORK/gpp2" > "$WORK/gpp2.log"
same_params "$WORK/gsrc/model.h5" "$WORK/gpp2/model.h5"
compare 3 "$WORK/g1" "$WORK/gpp2"

# Another model: refused before training, naming the key.
expect_exit 2 "$WORK/bad.log" trellis_run 1 "${base[@]}" "${llama[@]}" --model.d_ff=64 \
  --init.weights="$WORK/start.h5" --run.dir="$WORK/bad"
grep -q "init.weights = .*start.h5: model.d_ff = 48 there, 64 here" "$WORK/bad.log" \
  || fail "no error naming model.d_ff: $(tail -3 "$WORK/bad.log")"
echo "init weights: ok"
