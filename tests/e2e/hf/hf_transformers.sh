#!/usr/bin/env bash
# The Hugging Face bridge against transformers itself (docs/hugging-face.md):
#  (a) a random GPT2LMHeadModel (gelu, 2 layers, 4 heads, width 32, context 32, vocab 256), one
#      with GPT-2's own tanh GELU (gelu_new, transformers' default), and
#      a LlamaForCausalLM with grouped-query attention (4 heads, 2 kv heads, MLP 48, untied),
#      and a Llama 3 (llama3 RoPE scaling, biases, tied head, one kv head), each
#      saved by save_pretrained and `trellis import`ed: Trellis' logits on a prompt equal
#      transformers' within 1e-4 and its validation loss within 1e-5 relative;
#  (b) a Llama and a GPT-2 trained by Trellis (and the imported Llama 3), `trellis export
#      --format hf`ed and loaded by AutoModelForCausalLM.from_pretrained: the same logits and
#      loss;
#  (c) a sharded export (--shard-mb tiny, model-0000i-of-0000N + index) and a bf16 export load
#      too (bf16: against Trellis running the same rounded weights, imported back).
# Needs a Python with torch, transformers, safetensors and numpy: TRELLIS_HF_PYTHON, else
# TRELLIS_PYTHON; exits 77 (skipped) when it has none of them.
source "$(dirname "$0")/../common.sh"
HF_PY=${TRELLIS_HF_PYTHON:-$TRELLIS_PYTHON}
if ! "$HF_PY" -c "import torch, transformers, safetensors, numpy" > /dev/null 2>&1; then
  echo "SKIP: $HF_PY cannot import torch, transformers, safetensors and numpy" \
       "(set TRELLIS_HF_PYTHON to a Python that can)"
  exit 77
fi
hf() { "$HF_PY" "$TRELLIS_SRC/tests/e2e/hf/hf_transformers.py" "$@"; }
trellis() { timeout "${TRELLIS_RUN_TIMEOUT:-600}" "$TRELLIS_BIN" "$@"; }  # one rank: no launcher
PROMPT="It is a truth universally known"  # 31 bytes: one window of the models' 32 tokens

# The validation tokens `trellis eval` scores, for transformers too (.npy: its Python needs no h5py).
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" \
  --out-dir "$WORK/tokens" > /dev/null
"$TRELLIS_PYTHON" -c 'import sys, h5py, numpy; numpy.save(sys.argv[2], h5py.File(sys.argv[1])["tokens"][:])' \
  "$WORK/tokens/val.h5" "$WORK/val.npy"

# check WEIGHTS HF_DIR: Trellis' logits and loss of WEIGHTS, to be compared with transformers'
# of HF_DIR by compare_all (one Python start-up for every comparison).
check() {
  local weights=$1 dir=$2 name
  name=$(basename "$dir")
  trellis generate --weights "$weights" --prompt "$PROMPT" --tokens 0 --logits "$WORK/$name.npy" \
    > "$WORK/$name.gen.log" || fail "generate --logits $weights: $(tail -3 "$WORK/$name.gen.log")"
  trellis eval --weights "$weights" --data "$WORK/tokens/val.h5" > "$WORK/$name.eval.log" \
    || fail "eval $weights: $(tail -3 "$WORK/$name.eval.log")"
  printf 'logits\t%s\t%s\t%s\n' "$dir" "$PROMPT" "$WORK/$name.npy" >> "$WORK/checks.tsv"
  printf 'loss\t%s\t%s\t32\t%s\n' "$dir" "$WORK/val.npy" "$(eval_field "$WORK/$name.eval.log" loss)" \
    >> "$WORK/checks.tsv"
}
compare_all() { hf checks "$WORK/checks.tsv" || fail "Trellis and transformers differ (above)"; }

# (a) transformers -> Trellis.
hf make "$WORK/hf" > "$WORK/make.log" 2>&1 || fail "transformers could not make the models: $(tail -5 "$WORK/make.log")"
for model in gpt2 gpt2_tanh llama llama3; do
  trellis import --hf "$WORK/hf/$model" --out "$WORK/$model.h5" > "$WORK/import-$model.log" \
    || fail "import $model: $(tail -3 "$WORK/import-$model.log")"
  check "$WORK/$model.h5" "$WORK/hf/$model"
done
grep -q "KV2 F48 rope rmsnorm swiglu nobias untied" "$WORK/import-llama.log" \
  || fail "the imported Llama is not GQA/untied: $(cat "$WORK/import-llama.log")"
grep -q " gelu_tanh" "$WORK/import-gpt2_tanh.log" \
  || fail "gelu_new was not read as model.mlp = gelu_tanh: $(cat "$WORK/import-gpt2_tanh.log")"

# (b) Trellis -> transformers: a Llama (GQA, untied) and a GPT-2 trained a few steps.
train=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
       --data.test="$WORK/tokens/val.h5" --model.n_layer=2 --model.n_head=4 --model.d_model=32
       --model.seq_len=32 --train.global_batch=8 --train.max_steps=30 --train.eval_interval=0
       --train.eval_batch=8 --train.eval_max_samples=64 --log.interval=10 --sched.warmup_steps=5)
trellis "${train[@]}" --model.type=llama --model.n_kv_head=2 --model.d_ff=48 \
  --model.rope_theta=500000 --run.dir="$WORK/train-llama" > "$WORK/train-llama.log"
trellis "${train[@]}" --model.type=gpt --model.dropout=0.1 --run.dir="$WORK/train-gpt2" \
  > "$WORK/train-gpt2.log"
for model in llama gpt2; do
  trellis export --format hf --weights "$WORK/train-$model/model.h5" --out "$WORK/out-$model" \
    > "$WORK/export-$model.log" || fail "export $model: $(tail -3 "$WORK/export-$model.log")"
  check "$WORK/train-$model/model.h5" "$WORK/out-$model"
done
grep -q '"rope_theta": 500000' "$WORK/out-llama/config.json" || fail "rope_theta not exported"
# The imported Llama 3 back out: scaled RoPE, biases and the tied head as transformers has them;
# the tanh-GELU GPT-2 back out as gelu_new.
for model in llama3 gpt2_tanh; do
  trellis export --format hf --weights "$WORK/$model.h5" --out "$WORK/out-$model" \
    > "$WORK/export-$model.log"
  check "$WORK/$model.h5" "$WORK/out-$model"
done
grep -q '"activation_function": "gelu_new"' "$WORK/out-gpt2_tanh/config.json" \
  || fail "gelu_tanh not exported as gelu_new"

# (c) Sharded (about 10 KB a shard) and bf16 exports load in transformers.
trellis export --format hf --weights "$WORK/train-llama/model.h5" --out "$WORK/sharded" \
  --shard-mb 0.01 > "$WORK/export-sharded.log"
shards=$(ls "$WORK/sharded" | grep -c '^model-000..-of-000..\.safetensors$' || true)
[[ $shards -gt 1 && -f "$WORK/sharded/model.safetensors.index.json" ]] \
  || fail "no sharded export: $(ls "$WORK/sharded")"
check "$WORK/train-llama/model.h5" "$WORK/sharded"
trellis export --format hf --weights "$WORK/train-llama/model.h5" --out "$WORK/bf16" --dtype bf16 \
  > "$WORK/export-bf16.log"
trellis import --hf "$WORK/bf16" --out "$WORK/bf16.h5" > "$WORK/import-bf16.log"
check "$WORK/bf16.h5" "$WORK/bf16"

compare_all

# A config.json Trellis cannot run is refused with exit 3, naming the key.
sed 's/"activation_function": "gelu"/"activation_function": "quick_gelu"/' "$WORK/hf/gpt2/config.json" \
  > "$WORK/quick_gelu.json"
cp "$WORK/quick_gelu.json" "$WORK/hf/gpt2/config.json"
expect_exit 3 "$WORK/quick_gelu.log" "$TRELLIS_BIN" import --hf "$WORK/hf/gpt2" --out "$WORK/x.h5"
grep -q 'activation_function = "quick_gelu"' "$WORK/quick_gelu.log" \
  || fail "no error naming activation_function"
echo "hf transformers: ok"
