#!/usr/bin/env bash
# What caps 2-rank data-parallel efficiency for the MLP of `make bench` on this host? Per round:
#   - one 1-rank run at the per-rank batch (128) alone, and two of them at once on the two
#     cores (do the cores slow each other?);
#   - one 1-rank run at the global batch (256) and the real 2-rank run (the efficiency).
# usage: tools/bench/dp_ceiling.sh [rounds=3]   (TRELLIS_BIN, FASHION_DIR as for run_bench.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
bin=${TRELLIS_BIN:-build/trellis}
fashion=${FASHION_DIR:-data/fashion-mnist}
out=$(mktemp -d)
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi_flags=(--oversubscribe --bind-to core)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
args=(train --config inputs/fashion_mlp.ini --model.hidden=1024,1024 --data.train="$fashion/train.h5"
      --sched.type=constant --train.max_steps=200 --data.test= --data.cache=memory
      --log.interval=100000)
rate() { /usr/bin/python3 -c "import json,sys; print(int(json.load(open(sys.argv[1]+'/summary.json'))['samples_per_sec']))" "$1"; }
for ((i = 1; i <= rounds; i++)); do
  taskset -c 0 "$bin" "${args[@]}" --train.global_batch=128 --run.dir="$out/alone" > /dev/null
  taskset -c 0 "$bin" "${args[@]}" --train.global_batch=128 --run.dir="$out/both0" > /dev/null &
  taskset -c 1 "$bin" "${args[@]}" --train.global_batch=128 --run.dir="$out/both1" > /dev/null
  wait
  taskset -c 0 "$bin" "${args[@]}" --train.global_batch=256 --run.dir="$out/one" > /dev/null
  mpiexec "${mpi_flags[@]}" -n 2 "$bin" "${args[@]}" --train.global_batch=256 --run.dir="$out/dp" > /dev/null
  /usr/bin/python3 - "$(rate "$out/alone")" "$(rate "$out/both0")" "$(rate "$out/both1")" \
    "$(rate "$out/one")" "$(rate "$out/dp")" <<'PY'
import sys
alone, b0, b1, one, dp = map(int, sys.argv[1:])
print(f"batch 128: alone {alone}, two at once {b0} + {b1} ({(b0 + b1) / 2 / alone:.0%} of alone); "
      f"batch 256: 1 rank {one}, 2 ranks {dp}: efficiency {dp / (2 * one):.0%}, "
      f"{dp / (b0 + b1):.0%} of two independent batch-128 runs")
PY
done
rm -rf "$out"
