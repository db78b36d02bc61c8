#!/usr/bin/env bash
# Llama-family equivalence: a small Llama (rotary positions, RMSNorm, SwiGLU, grouped-query
# attention with 4 query and 2 kv heads, no biases, untied head) trained for 20 steps on the
# GPL text as byte tokens gives the same loss at every step, within 1e-5 relative, on one rank
# and on dp2, tp2 (query and kv heads split), pp2 (1F1B), dp2 x tp2, tp2 x pp2 and dp2 x pp2 with
# ZeRO-1 and overlapped bucketed reduction. Dropout is on. A checkpoint written on tp2 resumes
# on pp2 and ends on the uninterrupted run's losses. The saved model.h5 evaluates to the same
# validation loss on every layout and generates text. `trellis info` sizes inputs/llama3_8b.ini.
source "$(dirname "$0")/common.sh"
compare() { "$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps "$@"; }
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" \
  --out-dir "$WORK/tokens" > /dev/null
llama=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --model.type=llama
       --data.train="$WORK/tokens/train.h5" --data.test="$WORK/tokens/val.h5" --model.n_layer=2
       --model.n_head=4 --model.n_kv_head=2 --model.d_model=32 --model.d_ff=48 --model.seq_len=32
       --model.dropout=0.1 --train.global_batch=8 --train.max_steps=20 --train.eval_interval=0
       --train.eval_batch=8 --train.eval_max_samples=64 --log.interval=1 --sched.warmup_steps=5)
trellis_run 1 "${llama[@]}" --train.micro_batch=4 --run.dir="$WORK/1" > "$WORK/1.log"
grep -q "rope rmsnorm swiglu nobias untied" "$WORK/1.log" || fail "not a Llama: $(grep -m1 gpt "$WORK/1.log")"
trellis_run 2 "${llama[@]}" --run.dir="$WORK/dp2" > "$WORK/dp2.log"
trellis_run 2 "${llama[@]}" --parallel.tp=2 --run.dir="$WORK/tp2" > "$WORK/tp2.log"
trellis_run 2 "${llama[@]}" --parallel.pp=2 --train.micro_batch=2 --run.dir="$WORK/pp2" > "$WORK/pp2.log"
trellis_run 4 "${llama[@]}" --parallel.tp=2 --run.dir="$WORK/dp2tp2" > "$WORK/dp2tp2.log"
trellis_run 4 "${llama[@]}" --parallel.tp=2 --parallel.pp=2 --train.micro_batch=2 --run.dir="$WORK/tp2pp2" > "$WORK/tp2pp2.log"
trellis_run 4 "${llama[@]}" --parallel.pp=2 --parallel.zero=1 --parallel.bucket_mb=0.01 --run.dir="$WORK/dp2pp2z" > "$WORK/dp2pp2z.log"
compare 20 "$WORK/1" "$WORK/dp2" "$WORK/tp2" "$WORK/pp2" "$WORK/dp2tp2" "$WORK/tp2pp2" "$WORK/dp2pp2z"

# Multi-query attention (one kv head) splits its query heads over tp only if the kv head
# divides: refused by name.
if trellis_run 2 "${llama[@]}" --model.n_kv_head=1 --parallel.tp=2 --run.dir="$WORK/bad" > "$WORK/bad.log" 2>&1; then
  fail "n_kv_head 1 on tp2 was accepted"
fi
grep -q "model.n_kv_head" "$WORK/bad.log" || fail "no error naming model.n_kv_head: $(cat "$WORK/bad.log")"

# A checkpoint written at step 10 on tp2 resumes on pp2 and continues on the same losses.
trellis_run 2 "${llama[@]}" --parallel.tp=2 --ckpt.interval_steps=10 --fault.inject=0:10:signal --run.dir="$WORK/resume" > "$WORK/r1.log" || true
[[ "$(cat "$WORK/resume/checkpoints/latest")" == step-0000010 ]] || fail "no tp2 checkpoint at step 10"
trellis_run 2 "${llama[@]}" --parallel.pp=2 --train.micro_batch=2 --resume auto --run.dir="$WORK/resume" > "$WORK/r2.log"
grep -q "resume: .*step-0000010" "$WORK/r2.log" || fail "pp2 did not resume the tp2 checkpoint"
compare 20 "$WORK/1" "$WORK/resume"

# model.h5 from tp2 x pp2 evaluates to the single rank's validation loss and generates.
trellis_run 1 eval --weights "$WORK/1/model.h5" --data "$WORK/tokens/val.h5" > "$WORK/e1.log"
trellis_run 1 eval --weights "$WORK/tp2pp2/model.h5" --data "$WORK/tokens/val.h5" > "$WORK/e2.log"
"$TRELLIS_PYTHON" -c 'import sys; a, b = map(float, sys.argv[1:]); assert abs(a - b) <= 1e-4 * b, (a, b); print(f"validation loss {a} (tp2 x pp2 weights) vs {b} (one rank)")' \
  "$(eval_field "$WORK/e2.log" loss)" "$(eval_field "$WORK/e1.log" loss)" || fail "validation losses differ"
trellis_run 1 generate --weights "$WORK/tp2pp2/model.h5" --prompt "The " --tokens 20 --seed 3 > "$WORK/gen.txt"
[[ $(wc -c < "$WORK/gen.txt") -ge 20 ]] || fail "generate printed too little: $(cat "$WORK/gen.txt")"
# inputs/llama3_8b.ini is Llama 3.1 8B's shape: 8.03 B parameters and 5.79e10 training FLOPs
# per token (6 x the 7.5 B matmul parameters + 12 L d T for the attention), printed without
# data or allocation; the memory plan by category: fp32 parameters and gradients of 8.03 B
# (padded), Adam's two moments; with tp8 each rank holds an eighth of them.
trellis_run 1 info --config "$TRELLIS_SRC/inputs/llama3_8b.ini" > "$WORK/info1.log"
grep -q "model: llama, 8.03 B parameters, 4.74e+14 training FLOPs per sequence (5.79e+10 per token" "$WORK/info1.log" \
  || fail "llama3_8b.ini: $(grep model: "$WORK/info1.log")"
grep -q "parameters      29.9 GiB" "$WORK/info1.log" && grep -q "optimizer_state 59.8 GiB" "$WORK/info1.log" \
  || fail "$(tail -10 "$WORK/info1.log")"
trellis_run 8 info --config "$TRELLIS_SRC/inputs/llama3_8b.ini" --parallel.tp=8 > "$WORK/info8.log"
grep -q "parameters      3.74 GiB" "$WORK/info8.log" && grep -q "optimizer_state 7.48 GiB" "$WORK/info8.log" \
  || fail "tp8: $(tail -10 "$WORK/info8.log")"
# The same plan from one process (--ranks), and what recomputation and ZeRO-1 over 8 such
# groups (64 ranks, communicator exchange) change: the moments an eighth.
trellis_run 1 info --config "$TRELLIS_SRC/inputs/llama3_8b.ini" --parallel.tp=8 --ranks 8 > "$WORK/info8b.log"
diff <(grep -A12 "memory plan" "$WORK/info8.log") <(grep -A12 "memory plan" "$WORK/info8b.log") \
  || fail "--ranks 8 plans otherwise than 8 ranks"
trellis_run 1 info --config "$TRELLIS_SRC/inputs/llama3_8b.ini" --parallel.tp=8 --ranks 64 \
  --parallel.zero=1 --memory.recompute=full > "$WORK/info64.log"
grep -q "planned for 64 ranks: grid dp=8 x tp=8 x pp=1" "$WORK/info64.log" \
  && grep -q "optimizer_state 958 MiB" "$WORK/info64.log" || fail "64 ranks: $(tail -12 "$WORK/info64.log")"
echo "llama equivalence: ok"
