#!/usr/bin/env bash
# Step time of the GPT (inputs/gpt_char.ini, 4 layers) on every 2- and 4-rank layout of the
# process grid, split into compute (forward + backward), tp comm (the tensor-parallel
# all-reduces inside the layers), dp comm (the exposed part of the gradient reduction: what
# backward did not hide, ZeRO-1's all-gather, loss/statistics reductions), pipeline
# (waiting for and moving activations between stages: the bubble plus point-to-point) and the
# rest (data, optimizer). Layouts are interleaved and repeated; per layout it prints the median
# over repeats of each run's median step, with the spread of step time.
# usage: tools/bench/layouts.sh [repeats=3] [steps=30]
# needs: build/trellis and data/austen (make demo-gpt). On a machine with fewer cores than
# ranks, the ranks share cores, which inflates everything: compare layouts of one rank count.
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-3}
steps=${2:-30}
bin=${TRELLIS_BIN:-build/trellis}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi_flags=(--oversubscribe)
[[ $(id -u) -eq 0 ]] && mpi_flags+=(--allow-run-as-root)
# name ranks tp pp extra-args
layouts=(
  "1:1:1:1:"
  "dp2:2:1:1:"
  "tp2:2:2:1:"
  "pp2:2:1:2:"
  "dp4:4:1:1:"
  "tp4:4:4:1:"
  "pp4:4:1:4:"
  "pp4-gpipe:4:1:4:--parallel.schedule=gpipe"
  "dp2xtp2:4:2:1:"
  "dp2xpp2:4:1:2:"
  "tp2xpp2:4:2:2:"
  "dp4-zero1:4:1:1:--parallel.zero=1"
)
for ((r = 0; r < repeats; r++)); do
  for entry in "${layouts[@]}"; do
    IFS=: read -r name np tp pp extra <<< "$entry"
    # 16 sequences of 128 tokens per step in micro-batches of 2: 8 micro-batches on one rank,
    # enough for the pipeline to fill.
    mpiexec "${mpi_flags[@]}" -n "$np" "$bin" train --config inputs/gpt_char.ini --data.test= \
      --train.max_steps="$steps" --sched.warmup_steps=5 --train.micro_batch=2 --log.interval=1 \
      --parallel.tp="$tp" --parallel.pp="$pp" $extra --run.dir="$out/$name-$r" --run.overwrite=true > /dev/null
  done
done
/usr/bin/python3 tools/bench/layout_table.py --skip 3 "$out" "${layouts[@]%%:*}"
