#!/usr/bin/env bash
# `make demo-llama`, after its training run: the validation loss in bits per byte next to the
# byte-level GPT's (`make demo-gpt`, the same compute), the model exported as a Hugging Face
# folder, and text generated from it by `trellis generate` (key/value cache, the model's BPE
# tokenizer) and, where the Hugging Face venv exists (tools/install-deps.sh --hf), by
# transformers from the exported folder.
# usage: tools/demo_llama.sh BUILD_DIR RUN_DIR BPE_DIR [GPT_RUN_DIR]
set -euo pipefail
build=$1 run=$2 bpe=$3 gpt=${4:-runs/gpt_char}
tools_py=${TRELLIS_VENV:-/opt/trellis-venv}/bin/python
hf_py=${TRELLIS_HF_VENV:-/opt/trellis-hf-venv}/bin/python
prompt="It is a truth universally acknowledged"

# Bits per byte: the validation loss (nats per token) over ln 2, times the val split's tokens per
# byte (its ids decoded by the tokenizer).
"$tools_py" - "$run" "$bpe" "$gpt" <<'PY'
import json, math, os, sys
import h5py
from tokenizers import Tokenizer
run, bpe, gpt = sys.argv[1:]
def last_loss(path):
    rows = [json.loads(l) for l in open(f"{path}/metrics.jsonl") if "test_loss" in l]
    return rows[-1]["test_loss"] if rows else None
tok = Tokenizer.from_file(f"{bpe}/tokenizer.json")
ids = h5py.File(f"{bpe}/val.h5", "r")["tokens"][...].tolist()
nbytes = len(tok.decode(ids, skip_special_tokens=False).encode("utf-8"))
loss = last_loss(run)
bpb = loss / math.log(2) * len(ids) / nbytes
print(f"demo-llama: validation loss {loss:.4f} nats per BPE token = {bpb:.3f} bits per byte "
      f"({nbytes / len(ids):.2f} bytes per token)")
if os.path.exists(f"{gpt}/metrics.jsonl") and last_loss(gpt) is not None:
    g = last_loss(gpt)
    print(f"demo-llama: the byte-level GPT (inputs/gpt_char.ini, same compute): "
          f"{g / math.log(2):.3f} bits per byte")
else:
    print(f"demo-llama: `make demo-gpt` trains the byte-level GPT to compare with ({gpt})")
PY
"$build/trellis" export --format hf --weights "$run/model.h5" --out "$run/hf"
"$build/trellis" generate --weights "$run/model.h5" --prompt "$prompt" --tokens 80 --top-k 10 \
  --temperature 0.8 --seed 1
if "$hf_py" -c "import torch, transformers" > /dev/null 2>&1; then
  "$hf_py" - "$run/hf" "$prompt" <<'PY'
import sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
path, prompt = sys.argv[1:]
tok = AutoTokenizer.from_pretrained(path)
model = AutoModelForCausalLM.from_pretrained(path)
ids = tok(prompt, return_tensors="pt").input_ids
out = model.generate(ids, max_new_tokens=60, do_sample=False, pad_token_id=tok.eos_token_id)
print("demo-llama: transformers, greedy, from the exported folder:")
print(tok.decode(out[0]))
PY
else
  echo "demo-llama: tools/install-deps.sh --hf installs transformers to load $run/hf"
fi
