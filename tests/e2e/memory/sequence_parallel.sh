#!/usr/bin/env bash
# Sequence parallelism (parallel.sequence_parallel, nn/tensor_parallel.hpp, Megatron-SP): the
# blocks' residual stream, norms and saved inputs split by token rows over the tp group. Losses
# within 1e-5 of one rank at every step, and the final model.h5 too, for the GPT (dropout on)
# and the Llama block at tp 2, with selective and full recomputation, tp 2 x pp 2, and tp 2 x
# dp 2 with ZeRO-3; bf16 as close as plain tp 2; the saved activations of a rank shrink, the
# plan still equal to the measurement; the refusals name their keys.
source "$(dirname "$0")/../common.sh"
source "$(dirname "$0")/small_decoder.sh"
py=$TRELLIS_PYTHON
gpt+=(--parallel.grad_exchange=communicator)
llama+=(--parallel.grad_exchange=communicator)
sp=(--parallel.tp=2 --parallel.sequence_parallel=true)

run one 1 "${gpt[@]}"
run tp2 2 "${gpt[@]}" --parallel.tp=2
run sp 2 "${gpt[@]}" "${sp[@]}"
run sp-selective 2 "${gpt[@]}" "${sp[@]}" --memory.recompute=selective
run sp-full 2 "${gpt[@]}" "${sp[@]}" --memory.recompute=full
run sp-pp2 4 "${gpt[@]}" "${sp[@]}" --parallel.pp=2
run sp-z3 4 "${gpt[@]}" "${sp[@]}" --parallel.zero=3
close 1e-5 one tp2 sp sp-selective sp-full sp-pp2 sp-z3
run llama-one 1 "${llama[@]}"
run llama-tp2 2 "${llama[@]}" --parallel.tp=2
run llama-sp 2 "${llama[@]}" "${sp[@]}"
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 6 "$WORK/llama-one" \
  "$WORK/llama-tp2" "$WORK/llama-sp" || fail "llama losses differ"
# The Llama's final parameters differ by up to 2e-5 between one rank and plain tp 2 already
# (measured, host and portable builds: 1% of one Adam step at lr 3e-3, which magnifies the last
# bits of near-zero gradients); SP is held to the same 1e-4.
same_params 1e-4:1e-4 llama-one llama-tp2 llama-sp
run bf16 1 "${gpt[@]}" --precision.mode=bf16
run bf16-tp2 2 "${gpt[@]}" --precision.mode=bf16 --parallel.tp=2
run bf16-sp 2 "${gpt[@]}" --precision.mode=bf16 "${sp[@]}"
# 16-bit weights round differently once tp sums in another order: losses only, at 1e-4.
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-4 --steps 6 "$WORK/bf16" "$WORK/bf16-tp2" \
  "$WORK/bf16-sp" || fail "bf16 losses differ"

"$py" - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
s = {n: json.load(open(f"{w}/{n}/summary.json")) for n in ("tp2", "sp")}
for n, x in s.items():
    assert x["memory_peak"]["activations"] == x["memory_plan"]["activations"], (n, x)
a, b = s["tp2"]["memory_peak"]["activations"], s["sp"]["memory_peak"]["activations"]
# A block keeps 10 n d floats per tp-2 rank (residual stream h and output, the two norm outputs,
# qkv 3/2, yr 1/2, the MLP's pre-activation and output 2 each); sequence parallelism halves the
# first four: 10 -> 8 per block, 0.80, plus the embeddings and head it does not split (measured
# 0.85 on 2026-12-07; the branch outputs, once saved at tp 2 only, are transient in both).
assert b < 0.88 * a, (a, b)
print(f"sequence parallel: activations per rank at tp 2 {a / 2**20:.2f} -> {b / 2**20:.2f} MiB")
PY

expect_exit 2 "$WORK/seq.log" trellis_run 2 "${gpt[@]}" "${sp[@]}" --model.seq_len=63 \
  --run.dir="$WORK/seq"
grep -q "parallel.sequence_parallel = true, model.seq_len = 63 and parallel.tp = 2" "$WORK/seq.log" \
  || fail "no error naming model.seq_len: $(grep -m1 error "$WORK/seq.log")"
expect_exit 2 "$WORK/mlp.log" trellis_run 1 train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" \
  --data.train="$WORK/tokens/train.h5" --parallel.sequence_parallel=true --run.dir="$WORK/mlp"
grep -q "parallel.sequence_parallel = true and model.type = mlp" "$WORK/mlp.log" \
  || fail "no error naming parallel.sequence_parallel: $(tail -3 "$WORK/mlp.log")"
echo "sequence_parallel: ok"
