#!/usr/bin/env bash
# The memory table of docs/memory.md: a GPT (inputs/gpt_char.ini by default) at dp 1, 2 and 4
# with ZeRO 0, 1, 2 and 3 (ZeRO only from dp 2) and recomputation none, selective and full. Each run prints the memory plan
# made before anything is allocated and the ledger's measured peak (summary.json: the largest
# rank's), per category, and its throughput; the table compares them. Memory figures do not
# depend on the machine's load; the tokens/s are one run each on a shared machine (+-15%).
#
# usage: tools/bench/memory_table.sh [CONFIG]
# env:   TRELLIS_BIN (build/trellis), TEXT_DIR (data/austen: make demo-gpt prepares it),
#        STEPS (20), DPS ("1 2 4"), ZEROS ("0 1 2 3"), MODES ("none selective full"), ARGS (more
#        overrides), BENCH_OUT (keep the runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
config=${1:-inputs/gpt_char.ini}
bin=${TRELLIS_BIN:-build/trellis}
text=${TEXT_DIR:-data/austen}
steps=${STEPS:-20}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
[[ -e "$bin" && -e "$text/train.h5" ]] || { echo "memory_table: need $bin and $text/train.h5" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for dp in ${DPS:-1 2 4}; do
  for zero in ${ZEROS:-0 1 2 3}; do
    [[ $dp == 1 && $zero != 0 ]] && continue  # ZeRO over one rank shards nothing
    for mode in ${MODES:-none selective full}; do
      name="dp$dp-zero$zero-$mode"
      # shellcheck disable=SC2086
      mpiexec --oversubscribe -n "$dp" "$bin" train --config "$config" \
        --data.train="$text/train.h5" --data.test="$text/val.h5" --train.max_steps="$steps" \
        --train.eval_interval=0 --log.interval="$steps" --log.progress=lines \
        --parallel.zero="$zero" --parallel.grad_exchange=communicator \
        --memory.recompute="$mode" --run.dir="$out/$name" ${ARGS:-} > "$out/$name.log" 2>&1 \
        || { echo "memory_table: $name failed: $(tail -3 "$out/$name.log")" >&2; exit 1; }
    done
  done
done
python3 - "$out" <<'PY'
import json, os, re, sys
out = sys.argv[1]
mib = lambda b: f"{b / 2**20:.1f}"
print("| dp | zero | recompute | plan MiB | measured MiB | state (plan = measured) | "
      "activations + recompute | workspace | tokens/s |")
print("|---|---|---|---|---|---|---|---|---|")
for name in sorted(d for d in os.listdir(out) if os.path.isdir(f"{out}/{d}")):
    s = json.load(open(f"{out}/{name}/summary.json"))
    plan, peak = s["memory_plan"], s["memory_peak"]
    state = lambda m: m["parameters"] + m["gradients"] + m["optimizer_state"]
    act = lambda m: m["activations"] + m["recompute"]
    tps = re.search(r"\(([0-9]+) tokens/s\)", open(f"{out}/{name}.log").read())
    dp, zero, mode = re.match(r"dp(\d+)-zero(\d)-(\w+)", name).groups()
    print(f"| {dp} | {zero} | {mode} | {mib(s['memory_plan_bytes'])} | "
          f"{mib(s['memory_peak_bytes'])} | {mib(state(plan))} "
          f"({'=' if state(plan) == state(peak) else mib(state(peak))}) | {mib(act(plan))} / "
          f"{mib(act(peak))} | {mib(plan['workspace'])} / {mib(peak['workspace'])} | "
          f"{tps.group(1) if tps else '?'} |")
PY
