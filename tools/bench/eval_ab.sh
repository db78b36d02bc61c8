#!/usr/bin/env bash
# Two trellis binaries side by side on the same weights files: `trellis eval --cache` (1 rank,
# data in memory) alternating A and B, REPEATS rounds, so that drift on a shared machine hits
# both. Prints, per file, each binary's loss and accuracy (which must agree when a change is
# meant to keep the numbers) and its samples/s as median [min .. max], and B/A (median of the
# per-round ratios). For before/after figures of a change: A the build before it, B after.
#
# usage: tools/bench/eval_ab.sh BIN_A BIN_B REPEATS WEIGHTS:DATA:BATCH [WEIGHTS:DATA:BATCH ...]
#   e.g. tools/bench/eval_ab.sh /tmp/before/trellis build/trellis 5 \
#          runs/cnn/model.int8.h5:data/fashion-mnist/test.h5:500
set -euo pipefail
[[ $# -ge 4 ]] || { sed -n 2,10p "$0"; exit 2; }
bin_a=$1 bin_b=$2 repeats=$3
shift 3
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi=(mpiexec --oversubscribe --bind-to none -n 1)
[[ $(id -u) -eq 0 ]] && mpi+=(--allow-run-as-root)
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for round in $(seq "$repeats"); do
  for case in "$@"; do
    IFS=: read -r weights data batch <<< "$case"
    for side in a b; do
      bin=$bin_a
      [[ $side == b ]] && bin=$bin_b
      line=$("${mpi[@]}" "$bin" eval --weights "$weights" --data "$data" --batch "$batch" --cache \
        2>&1 | grep "^eval " | tail -1) || { echo "eval failed: $bin $case" >&2; exit 1; }
      printf '%s\t%s\t%s\t%s\n' "$weights" "$side" "$round" "$line" >> "$results"
    done
  done
done
/usr/bin/python3 - "$results" <<'PY'
import re, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
def field(line, name):
    m = re.search(name + r" ([0-9.]+)", line)
    return m.group(1) if m else "?"
rate = lambda line: float(re.search(r"([0-9.]+) samples/s", line).group(1))
print(f"{'weights':44} {'side':4} {'loss':>9} {'accuracy':>9} {'samples/s median [min .. max]':>30} {'B/A':>6}")
for weights in dict.fromkeys(r[0] for r in rows):
    mine = [r for r in rows if r[0] == weights]
    by = {s: {int(r[2]): r[3] for r in mine if r[1] == s} for s in "ab"}
    ratios = [rate(by["b"][k]) / rate(by["a"][k]) for k in by["a"]]
    for s in "ab":
        rates = [rate(l) for l in by[s].values()]
        first = next(iter(by[s].values()))
        ratio = f"{statistics.median(ratios):6.3f}" if s == "b" else ""
        print(f"{weights[-44:]:44} {s.upper():4} {field(first, 'loss'):>9} {field(first, 'accuracy'):>9} "
              f"{statistics.median(rates):12.0f} [{min(rates):.0f} .. {max(rates):.0f}]{'':4} {ratio:>6}")
PY
