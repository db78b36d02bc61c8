#!/usr/bin/env bash
# Training parity with PyTorch: a random Llama (GQA, untied head) and a GPT-2 made by
# transformers are imported (`trellis import`), trained 50 AdamW steps by Trellis from those
# weights (init.weights) and by PyTorch from the same ones, on the same data (a token stream of
# exactly one window, so every sample is that window on both sides), and every step's loss
# agrees within 1e-4 relative. Needs TRELLIS_HF_PYTHON (torch, transformers); skipped (77)
# without it.
source "$(dirname "$0")/../common.sh"
HF_PY=${TRELLIS_HF_PYTHON:-$TRELLIS_PYTHON}
if ! "$HF_PY" -c "import torch, transformers, safetensors, numpy" > /dev/null 2>&1; then
  echo "SKIP: $HF_PY cannot import torch, transformers, safetensors and numpy"
  exit 77
fi
py() { "$HF_PY" "$TRELLIS_SRC/tests/e2e/hf/torch_training.py" "$@"; }
py make "$WORK/hf" > "$WORK/make.log" 2>&1 || fail "transformers: $(tail -5 "$WORK/make.log")"
# The one-window token file (trellis.tokens, bytes: vocab 256).
"$TRELLIS_PYTHON" - "$WORK/hf/window.npy" "$WORK/window.h5" <<'PY'
import sys, h5py, numpy as np
tokens = np.load(sys.argv[1]).astype(np.uint16)
with h5py.File(sys.argv[2], "w") as f:
    f.create_dataset("tokens", data=tokens)
    f.attrs.update({"format": "trellis.tokens", "format_version": np.int32(1),
                    "vocab_size": np.int32(256), "tokenizer": "bytes", "split": "train"})
PY
for model in llama gpt2; do
  trellis_run 1 import --hf "$WORK/hf/$model" --out "$WORK/$model.h5" > "$WORK/import-$model.log" \
    || fail "import $model: $(tail -3 "$WORK/import-$model.log")"
  # The model.* keys the import printed (what a run starting from the file must say).
  read -r -a keys <<< "$(grep -o -- "--model\.[a-z_]*=[^ ]*" "$WORK/import-$model.log" | tr '\n' ' ')"
  [[ ${#keys[@]} -gt 3 ]] || fail "import $model printed no model keys: $(cat "$WORK/import-$model.log")"
  trellis_run 1 train --init.weights "$WORK/$model.h5" "${keys[@]}" --data.train="$WORK/window.h5" \
    --data.test= --train.global_batch=4 --train.max_steps=50 --log.interval=1 \
    --optim.type=adamw --optim.lr=1e-3 --optim.beta1=0.9 --optim.beta2=0.95 --optim.eps=1e-8 \
    --optim.weight_decay=0.1 --optim.clip_norm=0 --sched.type=constant --sched.warmup_steps=0 \
    --model.dropout=0 --run.dir="$WORK/run-$model" > "$WORK/train-$model.log" \
    || fail "train $model: $(tail -3 "$WORK/train-$model.log")"
  py train "$WORK/hf/$model" "$WORK/hf/window.npy" "$WORK/run-$model/metrics.jsonl" \
    || fail "$model: Trellis' losses differ from PyTorch's"
done
echo "torch training parity: ok"
