#!/usr/bin/env bash
# Activation recomputation (memory.recompute = selective | full, nn/block_stack.hpp): the same
# losses at every step and the same final parameters, bit for bit, as without recomputation,
# with dropout on, for the GPT and the Llama block, groups of 1 and 2 blocks, on 1 rank, dp 2
# with ZeRO-1, tp 2, pp 2 (1F1B, 4 micro-batches) and bf16, and for the MLP's hidden layers
# (full only, on 1 rank, tp 2 and pp 2); and the memory it saves: the peak of
# saved activations falls, the shared recompute buffers appear, backward scratch is unchanged.
source "$(dirname "$0")/../common.sh"
source "$(dirname "$0")/small_decoder.sh"
py=$TRELLIS_PYTHON
same() {  # same REFERENCE OTHER...: losses and final parameters bit for bit
  "$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 6 "$WORK/$1" "${@/#/$WORK/}" \
    || fail "losses differ: $*"
  same_params 0 "$@"
}
layouts=("1 " "2 --parallel.zero=1 --parallel.grad_exchange=communicator" "2 --parallel.tp=2"
         "2 --parallel.pp=2" "1 --precision.mode=bf16")
for i in "${!layouts[@]}"; do
  read -r np extra <<< "${layouts[$i]}"
  # shellcheck disable=SC2086
  run "gpt$i-none" "$np" "${gpt[@]}" $extra
  # shellcheck disable=SC2086
  run "gpt$i-full" "$np" "${gpt[@]}" $extra --memory.recompute=full
  # shellcheck disable=SC2086
  run "gpt$i-selective" "$np" "${gpt[@]}" $extra --memory.recompute=selective
  same "gpt$i-none" "gpt$i-full" "gpt$i-selective"
done
run gpt0-every2 1 "${gpt[@]}" --memory.recompute=full --memory.recompute_every=2
same gpt0-none gpt0-every2
run llama-none 2 "${llama[@]}" --parallel.tp=2
run llama-full 2 "${llama[@]}" --parallel.tp=2 --memory.recompute=full
run llama-selective 2 "${llama[@]}" --parallel.tp=2 --memory.recompute=selective
same llama-none llama-full llama-selective

"$py" - "$WORK" <<'PY'
import json, sys
w = sys.argv[1]
peak = lambda name: json.load(open(f"{w}/{name}/summary.json"))["memory_peak"]
none, full, every2 = peak("gpt0-none"), peak("gpt0-full"), peak("gpt0-every2")
sel = peak("gpt0-selective")
mib = lambda b: f"{b / 2**20:.2f} MiB"
# Four blocks' saved activations shrink to four checkpoints plus one block's shared buffers.
assert none["recompute"] == 0 and full["recompute"] > 0, (none, full)
assert full["activations"] + full["recompute"] < 0.7 * none["activations"], (none, full)
assert every2["recompute"] == 2 * full["recompute"], (full, every2)
assert full["workspace"] == none["workspace"], (none, full)
# Selective: the norms' and the GELU's outputs (6 of the block's 17 d-wide saved rows).
assert sel["recompute"] > 0 and sel["activations"] + sel["recompute"] < 0.9 * none["activations"], sel
assert sel["workspace"] == none["workspace"], (none, sel)
# bf16: the autocast copies of the recomputed outputs are recomputed too.
b_none, b_sel = peak("gpt4-none"), peak("gpt4-selective")
assert b_sel["half_copies"] < b_none["half_copies"], (b_none, b_sel)
print(f"recompute: activations {mib(none['activations'])} -> {mib(full['activations'])} "
      f"+ recompute {mib(full['recompute'])} (every 2: {mib(every2['activations'])} + "
      f"{mib(every2['recompute'])}; selective {mib(sel['activations'])} + "
      f"{mib(sel['recompute'])}; bf16 16-bit copies {mib(b_none['half_copies'])} -> "
      f"{mib(b_sel['half_copies'])})")
PY
# Does not fit -> fits: with memory.limit_gb at 80% of the plan of dp 4 without ZeRO or
# recomputation, that layout is refused at start-up; dp 4 with ZeRO-1 and full recomputation
# trains under the same limit, with the losses of the unsharded one-rank run within 1e-5.
run dp4-plain 4 "${gpt[@]}" --parallel.grad_exchange=communicator
limit=$("$py" -c 'import json, sys; print(0.8 * json.load(open(sys.argv[1]))["memory_plan_bytes"] / 2**30)' \
  "$WORK/dp4-plain/summary.json")
trellis_run 4 "${gpt[@]}" --parallel.grad_exchange=communicator --memory.limit_gb="$limit" \
  --run.dir="$WORK/dp4-refused" > "$WORK/dp4-refused.log" 2>&1 && fail "dp 4 fitted under $limit GiB"
grep -q "memory.limit_gb = .*would help: memory.recompute = selective or full.*parallel.zero = 3" \
  "$WORK/dp4-refused.log" || fail "dp 4 refusal: $(grep -m1 error "$WORK/dp4-refused.log")"
run dp4-fits 4 "${gpt[@]}" --parallel.grad_exchange=communicator --memory.limit_gb="$limit" \
  --parallel.zero=1 --memory.recompute=full
"$py" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 6 "$WORK/gpt0-none" \
  "$WORK/dp4-plain" "$WORK/dp4-fits" || fail "dp 4 losses differ from one rank's"
# The MLP: each hidden layer (fc + activation, dropout) a recomputed unit, groups of 1 and 2, on
# 1 rank, tp 2 and pp 2: bit for bit. It has nothing cheap to drop, so selective is refused.
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --model.hidden=64,48,32 --model.dropout=0.1 --train.max_steps=6
     --train.global_batch=32 --log.interval=1 --data.cache=none)
mlp_layouts=("1 " "2 --parallel.tp=2" "2 --parallel.pp=2")
for i in "${!mlp_layouts[@]}"; do
  read -r np extra <<< "${mlp_layouts[$i]}"
  # shellcheck disable=SC2086
  run "mlp$i-none" "$np" "${mlp[@]}" $extra
  for every in 1 2; do
    # shellcheck disable=SC2086
    run "mlp$i-full$every" "$np" "${mlp[@]}" $extra --memory.recompute=full \
      --memory.recompute_every=$every
  done
  same "mlp$i-none" "mlp$i-full1" "mlp$i-full2"
done
expect_exit 2 "$WORK/mlp.log" trellis_run 1 "${mlp[@]}" --memory.recompute=selective \
  --run.dir="$WORK/mlp"
grep -q "memory.recompute = selective: model.type = mlp has no such recomputation" "$WORK/mlp.log" \
  || fail "no error naming memory.recompute: $(tail -3 "$WORK/mlp.log")"
echo "recompute: ok"
