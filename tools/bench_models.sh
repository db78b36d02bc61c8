#!/usr/bin/env bash
# Throughput of the CNN (inputs/fashion_cnn.ini, samples/s) and the GPT (inputs/gpt_char.ini,
# tokens/s) at 1 and 2 ranks, interleaved and repeated; prints median and spread.
# usage: tools/bench_models.sh [repeats=3] [steps=60]
# needs: build/trellis, data/fashion-mnist (make demo) and data/austen (make demo-gpt)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-3}
steps=${2:-60}
bin=${TRELLIS_BIN:-build/trellis}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi_flags=(--oversubscribe --bind-to core)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
for ((r = 0; r < repeats; r++)); do
  for np in 1 2; do
    mpiexec "${mpi_flags[@]}" -n "$np" "$bin" train --config inputs/fashion_cnn.ini --data.test= \
      --train.max_steps="$steps" --log.interval=100000 --run.dir="$out/run" > /dev/null
    /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['samples_per_sec'])" \
      "$out/run/summary.json" >> "$out/cnn-np$np"
    mpiexec "${mpi_flags[@]}" -n "$np" "$bin" train --config inputs/gpt_char.ini --data.test= \
      --train.max_steps="$steps" --sched.warmup_steps=10 --log.interval=100000 --run.dir="$out/run" > /dev/null
    /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_sec'])" \
      "$out/run/summary.json" >> "$out/gpt-np$np"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import os, statistics, sys
for name, unit in (("cnn", "samples/s"), ("gpt", "tokens/s")):
    for np in (1, 2):
        xs = [float(l) for l in open(os.path.join(sys.argv[1], f"{name}-np{np}"))]
        print(f"{name} {np} rank(s): {statistics.median(xs):8.0f} {unit}  [{min(xs):.0f} .. {max(xs):.0f}]")
PY
