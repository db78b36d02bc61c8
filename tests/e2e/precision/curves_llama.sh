#!/usr/bin/env bash
# Mixed precision (precision.mode) on the Llama: bf16 and fp16 track the fp32 loss curve over
# 300 steps, the mean loss of every 50-step window within a stated relative tolerance
# (measured worst case: Llama 1.3% (fp16; bf16 0.6%, 2026-12-06)).
source "$(dirname "$0")/common.sh"
"$py" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" --out-dir "$WORK/austen" > /dev/null
curves llama 0.02 --config "$TRELLIS_SRC/inputs/llama_char.ini" --data.train="$WORK/austen/train.h5" \
  --train.global_batch=8 --model.seq_len=64 --train.epochs=50
echo "mixed precision, Llama: all checks passed"
