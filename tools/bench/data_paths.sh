#!/usr/bin/env bash
# Throughput of the Fashion-MNIST MLP: Trellis at 1 and 2 ranks (reading every batch from HDF5,
# and with data.cache=memory) against PyTorch with 1 and 2 threads (data in memory), on the
# same model, data and cores, interleaved and repeated (the machine is shared and noisy).
# Prints the median and spread of samples/s and the Trellis / PyTorch ratios.
#
# usage: tools/bench/data_paths.sh [repeats=5] [steps=300]
# needs: build/trellis, data/fashion-mnist/train.h5 (make demo prepares it), python3-torch
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-5}
steps=${2:-300}
data=${DATA:-data/fashion-mnist/train.h5}
bin=${TRELLIS_BIN:-build/trellis}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi_flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
have_torch=1
/usr/bin/python3 -c "import torch" 2>/dev/null || have_torch=0

for ((r = 0; r < repeats; r++)); do
  for np in 1 2; do
    for cache in none memory; do
      mpiexec "${mpi_flags[@]}" -n "$np" --bind-to core "$bin" train --config inputs/fashion_mlp.ini \
        --data.train="$data" --data.test= --data.cache=$cache --train.max_steps="$steps" \
        --log.interval=100000 --sched.type=constant --run.dir="$out/run" --run.overwrite=true > /dev/null
      /usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['samples_per_sec'])" \
        "$out/run/summary.json" >> "$out/trellis-$cache-np$np"
    done
    if [[ $have_torch -eq 1 ]]; then
      /usr/bin/python3 tools/torch_mlp_reference.py --data "$data" --steps "$steps" --threads "$np" |
        /usr/bin/python3 -c "import json,sys; print(json.load(sys.stdin)['samples_per_sec'])" >> "$out/torch-t$np"
    fi
  done
done

/usr/bin/python3 - "$out" "$have_torch" <<'PY'
import os, statistics, sys
out, have_torch = sys.argv[1], sys.argv[2] == "1"
def load(name):
    path = os.path.join(out, name)
    return [float(l) for l in open(path)] if os.path.exists(path) else []
def fmt(xs):
    return f"{statistics.median(xs):9.0f}  [{min(xs):.0f} .. {max(xs):.0f}]" if xs else "n/a"
print(f"{'run':<34}{'samples/s median [min .. max]':>34}")
for np in (1, 2):
    p = load(f"torch-t{np}") if have_torch else []
    if p:
        print(f"{'pytorch, ' + str(np) + ' thread(s)':<34}{fmt(p):>34}")
    for cache in ("none", "memory"):
        t = load(f"trellis-{cache}-np{np}")
        print(f"{'trellis, ' + str(np) + ' rank(s), cache=' + cache:<34}{fmt(t):>34}")
        if p:
            ratios = [a / b for a, b in zip(t, p)]
            print(f"  ratio trellis/pytorch: median {statistics.median(ratios):.2f}"
                  f" [{min(ratios):.2f} .. {max(ratios):.2f}]")
PY
