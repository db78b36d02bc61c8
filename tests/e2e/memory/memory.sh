#!/usr/bin/env bash
# Memory by category (core/memory_ledger.hpp): the ledger's peaks in summary.json and
# metrics.jsonl hold exactly what the layout allocates for the training state:
#  - 1 rank, AdamW: parameters = gradients = 4 bytes x the padded parameter buffer, optimizer
#    state = 2 x parameters; SGD without momentum: no optimizer state;
#  - dp 2 with ZeRO-1 through the communicator: the moments of half the buffer (1 x
#    parameters; the update writes the parameters' pieces in place, no master copy), the
#    gradients and their reduced shard (1.5 x), against 2 x and 1 x on dp 2 without; through
#    node shared memory (a window MPI allocates, counted too) the shard is the gradients' own
#    slice: moments of half the buffer (1 x), gradients 1 x;
#  - bf16 autocast: 16-bit copies appear; pp 2: each rank holds about half the parameters and
#    the summary names the rank with the largest peak;
#  - the decay and norm masks take a byte per element each (about half the parameters' bytes
#    together, where float masks took twice them);
#  - every interval of metrics.jsonl: current <= peak, all ten categories; summary's
#    categories at the peak sum to the peak;
#  - the memory plan made before anything is allocated (config/memory_plan.hpp, summary's
#    memory_plan): the state (parameters, gradients, optimizer state) exactly as measured on
#    every one-stage layout, activations, recompute buffers, workspace and the total within
#    10% (pp 2: the largest stage's total against the largest rank's); with full
#    recomputation too; memory.limit_gb below the plan refuses the run at start-up (exit 2)
#    naming the categories and memory.recompute, and the same limit lets the recomputing
#    layout train.
source "$(dirname "$0")/../common.sh"
py=$TRELLIS_PYTHON
"$py" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" --out-dir "$WORK/tokens" \
  > /dev/null
gpt=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" --data.train="$WORK/tokens/train.h5"
     --data.test="$WORK/tokens/val.h5" --model.n_layer=2 --model.n_head=4 --model.d_model=64
     --model.seq_len=64 --train.global_batch=8 --train.max_steps=6 --train.eval_interval=0
     --train.eval_batch=8 --train.eval_max_samples=32 --log.interval=2 --log.progress=lines)
run() {  # run NAME NP ARGS...
  local name=$1 np=$2
  shift 2
  trellis_run "$np" "${gpt[@]}" --run.dir="$WORK/$name" "$@" > "$WORK/$name.log" 2>&1 \
    || fail "$name: $(tail -5 "$WORK/$name.log")"
  grep -q "memory: peak .* on rank" "$WORK/$name.log" || fail "$name: no memory line on the console"
}
run adamw 1
run sgd 1 --optim.type=sgd --optim.momentum=0
run dp2 2 --parallel.zero=0 --parallel.grad_exchange=communicator
run zero1 2 --parallel.zero=1 --parallel.grad_exchange=communicator
if $SHARED_MEMORY_EXCHANGE; then
  run zero1_shared 2 --parallel.zero=1 --parallel.grad_exchange=shared_memory
fi
run bf16 1 --precision.mode=bf16
run pp2 2 --parallel.pp=2
run recompute 1 --memory.recompute=full
# A limit between the two plans: refused without recomputation, trained with it.
limit=$("$py" -c 'import json, sys; n = json.load(open(sys.argv[1]))["memory_plan_bytes"]; r = json.load(open(sys.argv[2]))["memory_plan_bytes"]; print((n + r) / 2 / 2**30)' \
  "$WORK/adamw/summary.json" "$WORK/recompute/summary.json")
trellis_run 1 "${gpt[@]}" --run.dir="$WORK/refused" --memory.limit_gb="$limit" > "$WORK/refused.log" 2>&1 \
  && fail "memory.limit_gb = $limit did not refuse the run"
grep -q "memory.limit_gb = .* by the memory plan (.*activations.*would help: memory.recompute = selective or full" \
  "$WORK/refused.log" || fail "no refusal naming the plan and memory.recompute: $(tail -3 "$WORK/refused.log")"
run fits 1 --memory.recompute=full --memory.limit_gb="$limit"

"$py" - "$WORK" "$SHARED_MEMORY_EXCHANGE" <<'PY'
import json, sys
w, shared = sys.argv[1], sys.argv[2] == "true"
categories = ["parameters", "gradients", "optimizer_state", "half_copies", "activations",
              "workspace", "recompute", "communication", "data", "other"]

def summary(name):
    s = json.load(open(f"{w}/{name}/summary.json"))
    for key in ("memory_peak", "memory_at_peak"):
        assert list(s[key]) == categories, (name, key, list(s[key]))
    assert sum(s["memory_at_peak"].values()) == s["memory_peak_bytes"], (name, s)
    for line in open(f"{w}/{name}/metrics.jsonl"):
        r = json.loads(line)
        if "loss" not in r:
            continue
        assert list(r["memory_peak"]) == categories, r
        assert 0 < r["memory_bytes"] <= r["memory_peak_bytes"], r
    plan, peak = s["memory_plan"], s["memory_peak"]
    assert list(plan) == categories, (name, plan)
    near = lambda a, b: abs(a - b) <= 0.1 * max(a, b)
    assert near(s["memory_plan_bytes"], s["memory_peak_bytes"]), (name, plan, peak)
    if name != "pp2":
        # The state and every buffer sized from it or from the batch: to the byte.
        for key in ("parameters", "gradients", "optimizer_state", "half_copies", "communication",
                    "data", "other"):
            assert plan[key] == peak[key], (name, key, plan[key], peak[key])
        for key in ("activations", "recompute", "workspace"):
            assert near(plan[key], peak[key]), (name, key, plan[key], peak[key])
    return s["memory_peak"], s

adamw, s = summary("adamw")
params = adamw["parameters"]
# The padded buffer: every parameter starts on a 64-byte boundary, so a little above 4 x count.
assert 4 * s["parameters_per_rank"] <= params < 4 * s["parameters_per_rank"] + 64 * 64, (params, s)
assert adamw["gradients"] == params and adamw["optimizer_state"] == 2 * params, adamw
assert adamw["activations"] > 0 and adamw["data"] > 0 and adamw["half_copies"] == 0, adamw
# The decay and norm masks are a byte per element each (float masks were 2 x parameters).
assert adamw["other"] < 0.6 * params, adamw
sgd, _ = summary("sgd")
assert sgd["parameters"] == params and sgd["optimizer_state"] == 0, sgd
dp2, _ = summary("dp2")
zero1, _ = summary("zero1")
assert dp2["parameters"] == params and dp2["optimizer_state"] == 2 * params, dp2
assert dp2["gradients"] == params, dp2
# ZeRO-1 on 2 ranks: exp_avg and exp_avg_sq of half the buffer (no master copy); the whole
# gradient buffer and its reduced half.
assert zero1["parameters"] == params and zero1["optimizer_state"] == params, zero1
assert zero1["gradients"] * 2 == 3 * params, zero1
if shared:
    zs, _ = summary("zero1_shared")
    assert zs["parameters"] == params and zs["gradients"] == params, zs
    assert zs["optimizer_state"] == params, zs
bf16, _ = summary("bf16")
assert bf16["half_copies"] > 0 and bf16["parameters"] == params, bf16
rec, _ = summary("recompute")
assert rec["recompute"] > 0 and rec["activations"] < adamw["activations"], (rec, adamw)
summary("fits")
pp2, s2 = summary("pp2")
assert 0 < pp2["parameters"] < params, (pp2, params)
assert s2["memory_peak_rank"] in (0, 1), s2
mib = lambda b: f"{b / 2**20:.2f} MiB"
print("memory: adamw " + ", ".join(f"{k} {mib(v)}" for k, v in adamw.items() if v)
      + f"; zero1 optimizer state {mib(zero1['optimizer_state'])} vs dp2 "
      f"{mib(dp2['optimizer_state'])}; pp2 parameters {mib(pp2['parameters'])} per rank at most")
PY
echo "memory: ok"
