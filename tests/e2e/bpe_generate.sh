#!/usr/bin/env bash
# BPE text end to end: tools/text_to_bpe.py tokenises the GPL text with a 512-token byte-level
# BPE; a small Llama trains on it and keeps the tokenizer in model.h5; `trellis generate`
# encodes the prompt with it, decodes text, and gives the same greedy tokens with the key/value
# cache and without it (--no-cache), for the Llama and for a GPT-2 (learned positions), while
# prompt and output fit the window; past the window both still write text. `export --format hf`
# writes tokenizer.json and tokenizer_config.json beside the model; int8 weights keep it too.
source "$(dirname "$0")/common.sh"
"$TRELLIS_SRC/tools/text_to_bpe.py" --src "$TRELLIS_TEXT_CORPUS" --out-dir "$WORK/bpe" \
  --vocab-size 512 --val-block 4096 > "$WORK/bpe.log" 2>&1 || fail "text_to_bpe: $(tail -3 "$WORK/bpe.log")"
base=(train --config "$TRELLIS_SRC/inputs/llama_char.ini" --data.train="$WORK/bpe/train.h5"
      --data.test="$WORK/bpe/val.h5" --model.n_layer=2 --model.d_model=64 --model.seq_len=64
      --model.d_ff=176 --train.global_batch=8 --train.max_steps=60 --train.eval_interval=0
      --train.eval_max_samples=64 --sched.warmup_steps=10 --log.interval=20)
trellis_run 2 "${base[@]}" --run.dir="$WORK/llama" > "$WORK/llama.log"
trellis_run 1 "${base[@]}" --model.type=gpt --model.positions=auto --model.norm=auto \
  --model.mlp=auto --model.bias=auto --model.tied_head=auto --model.n_kv_head=0 --model.d_ff=0 \
  --run.dir="$WORK/gpt" > "$WORK/gpt.log"
"$TRELLIS_PYTHON" - "$WORK/llama/model.h5" "$WORK/bpe/tokenizer.json" <<'PY' || fail "model.h5 has no tokenizer"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert bytes(f["tokenizer_json"][...]) == open(sys.argv[2], "rb").read()
print("model.h5 keeps the BPE tokenizer")
PY
for model in llama gpt; do
  gen=(generate --weights "$WORK/$model/model.h5" --prompt "This License applies to" --temperature 0)
  trellis_run 1 "${gen[@]}" --tokens 30 > "$WORK/$model-cache.txt"
  trellis_run 1 "${gen[@]}" --tokens 30 --no-cache > "$WORK/$model-nocache.txt"
  grep -q "key/value cache" "$WORK/$model-cache.txt" || fail "$model: no cache: $(cat "$WORK/$model-cache.txt")"
  text() { grep -v "^generate:" "$1"; }
  [[ "$(text "$WORK/$model-cache.txt")" == "$(text "$WORK/$model-nocache.txt")" ]] ||
    fail "$model: cached and cache-less greedy text differ: $(text "$WORK/$model-cache.txt") / $(text "$WORK/$model-nocache.txt")"
  grep -q "^This License applies to" "$WORK/$model-cache.txt" || fail "$model: $(cat "$WORK/$model-cache.txt")"
  echo "$model: $(text "$WORK/$model-cache.txt" | head -c 120)"
  # Past the 64-token window: the cache restarts from its last half, and text still comes out.
  trellis_run 1 "${gen[@]}" --tokens 150 > "$WORK/$model-long.txt"
  grep -q "restarted" "$WORK/$model-long.txt" || fail "$model: no restart past the window"
done
# An int8 model keeps the tokenizer too (and recomputes its window: no cache).
trellis_run 1 quantize --weights "$WORK/llama/model.h5" --calib "$WORK/bpe/train.h5" --batch 8 \
  --batches 2 --out "$WORK/llama/int8.h5" > "$WORK/quantize.log"
trellis_run 1 generate --weights "$WORK/llama/int8.h5" --prompt "This License applies to" \
  --tokens 10 > "$WORK/int8.txt"
grep -q "^This License applies to" "$WORK/int8.txt" || fail "int8 generate: $(cat "$WORK/int8.txt")"
grep -q "no cache" "$WORK/int8.txt" || fail "int8 generate: $(cat "$WORK/int8.txt")"
trellis_run 1 export --format hf --weights "$WORK/llama/model.h5" --out "$WORK/hf" > "$WORK/export.log"
cmp "$WORK/hf/tokenizer.json" "$WORK/bpe/tokenizer.json" || fail "export: tokenizer.json differs"
grep -q '"eos_token": "<|endoftext|>"' "$WORK/hf/tokenizer_config.json" || fail "tokenizer_config: $(cat "$WORK/hf/tokenizer_config.json")"
echo "bpe generate: ok"
