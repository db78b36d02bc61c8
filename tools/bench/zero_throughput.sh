#!/usr/bin/env bash
# What ZeRO-2 and ZeRO-3 cost in throughput against ZeRO-1 on the GPT (inputs/gpt_char.ini by
# default), at dp 2 and dp 4: the stages alternate within each round, and the table gives the
# median tokens/s over the rounds, the spread, and each stage's ratio to ZeRO-1's median. One
# more ZeRO-3 run per dp records a timeline (monitor.trace) of 3 steps; from it the script sums
# how long the parameter gathers were in flight and how long compute waited for them (the span
# "wait for parameter gather"): the part of the gathers that forward and backward did not hide.
#
# usage: tools/bench/zero_throughput.sh [CONFIG]
# env:   TRELLIS_BIN (build/trellis), TEXT_DIR (data/austen), STEPS (30), ROUNDS (3),
#        DPS ("2 4"), ARGS (more overrides), BENCH_OUT (keep the runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
config=${1:-inputs/gpt_char.ini}
bin=${TRELLIS_BIN:-build/trellis}
text=${TEXT_DIR:-data/austen}
steps=${STEPS:-30}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
[[ -e "$bin" && -e "$text/train.h5" ]] || { echo "zero_throughput: need $bin and $text/train.h5" >&2; exit 1; }
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
train() {  # train NAME DP ZERO [ARGS...]
  local name=$1 dp=$2 zero=$3
  shift 3
  # shellcheck disable=SC2086
  mpiexec --oversubscribe -n "$dp" "$bin" train --config "$config" --data.train="$text/train.h5" \
    --data.test= --train.max_steps="$steps" --log.interval="$steps" --log.progress=lines \
    --parallel.zero="$zero" --parallel.grad_exchange=communicator --run.dir="$out/$name" \
    --run.overwrite=true ${ARGS:-} "$@" > "$out/$name.log" 2>&1 \
    || { echo "zero_throughput: $name failed: $(tail -3 "$out/$name.log")" >&2; exit 1; }
}
for dp in ${DPS:-2 4}; do
  for ((round = 1; round <= ${ROUNDS:-3}; round++)); do
    for zero in 1 2 3; do train "dp$dp-zero$zero-r$round" "$dp" "$zero"; done
  done
  train "dp$dp-trace" "$dp" 3 --monitor.trace="$out/dp$dp-trace/timeline/" \
    --monitor.trace_steps=$((steps - 3)):$((steps - 1))
done
python3 - "$out" "${DPS:-2 4}" <<'PY'
import glob, json, os, re, statistics, sys
out, dps = sys.argv[1], sys.argv[2].split()
rate = lambda name: json.load(open(f"{out}/{name}/summary.json"))["tokens_per_sec"]
print("| dp | zero | tokens/s (median) | spread | vs ZeRO-1 |")
print("|---|---|---|---|---|")
for dp in dps:
    med = {}
    for zero in (1, 2, 3):
        runs = sorted(glob.glob(f"{out}/dp{dp}-zero{zero}-r*/summary.json"))
        rates = [rate(os.path.basename(os.path.dirname(r))) for r in runs]
        med[zero] = statistics.median(rates)
        print(f"| {dp} | {zero} | {med[zero]:.0f} | {min(rates):.0f}-{max(rates):.0f} | "
              f"{med[zero] / med[1]:.2f} |")
for dp in dps:
    events = json.load(open(f"{out}/dp{dp}-trace/timeline/trace.json"))["traceEvents"]
    gathers = {}
    for e in events:  # async spans: a begin and an end per gather, per rank
        if e.get("name") == "parameter gather" and e["ph"] in ("b", "e"):
            gathers.setdefault((e["pid"], e["id"]), {})[e["ph"]] = e["ts"]
    flight = sum(g["e"] - g["b"] for g in gathers.values() if "b" in g and "e" in g)
    waited = sum(e.get("dur", 0) for e in events if e.get("name") == "wait for parameter gather")
    ranks = len({e["pid"] for e in events if e.get("name") == "wait for parameter gather"}) or 1
    if flight > 0:
        print(f"dp {dp}: {len(gathers)} gathers over 3 steps, {flight / 1e3:.1f} ms in flight, "
              f"compute waited {waited / 1e3:.1f} ms ({ranks} ranks): "
              f"{100 * (1 - waited / flight):.0f}% hidden")
PY
echo "runs and the timelines (open trace.json in Perfetto): $out"
