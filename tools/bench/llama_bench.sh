#!/usr/bin/env bash
# The small Llama (inputs/llama_char.ini) against transformers' LlamaForCausalLM on one core,
# side by side: Trellis fp32 and bf16 (precision.mode) against PyTorch eager and torch.compile,
# fp32 and under torch.autocast bf16 (tools/bench/llama_peer.py), same shapes, batch, optimizer
# and data in memory, one thread each, pinned to one core. The runs alternate within each
# repetition; the summary prints the median and spread (min..max) of tokens/s and the ratio
# of medians against each peer.
#
# usage: tools/bench/llama_bench.sh [repeats=3]
# env:   TRELLIS_BIN (build/trellis), PEER_PYTHON (a Python with torch 2.x and transformers,
#        e.g. `python3 -m venv /tmp/venv-hf && /tmp/venv-hf/bin/pip install torch transformers
#        h5py`), TEXT_DIR (data/austen: make demo-gpt prepares it), STEPS (30), CORE (0),
#        PEERS ("eager compile"), BENCH_OUT (keep raw results)
set -euo pipefail
cd "$(dirname "$0")/../.."
repeats=${1:-3}
bin=${TRELLIS_BIN:-build/trellis}
python=${PEER_PYTHON:-python3}
text=${TEXT_DIR:-data/austen}
steps=${STEPS:-30}
core=${CORE:-0}
peers=${PEERS:-eager compile}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
"$python" -c "import torch, transformers, h5py" 2>/dev/null || {
  echo "llama_bench: $python lacks torch, transformers or h5py (set PEER_PYTHON)" >&2
  exit 1
}
[[ -e "$bin" && -e "$text/train.h5" ]] || { echo "llama_bench: need $bin and $text/train.h5" >&2; exit 1; }

trellis() {  # precision
  taskset -c "$core" "$bin" train --config inputs/llama_char.ini --data.train="$text/train.h5" \
    --data.test= --train.max_steps="$steps" --sched.warmup_steps=5 --log.interval=100000 \
    --precision.mode="$1" --run.dir="$out/run" --run.overwrite=true > "$out/last.log" 2>&1 \
    || { cat "$out/last.log" >&2; exit 1; }
  "$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_sec'])" \
    "$out/run/summary.json" >> "$out/trellis-$1"
}
peer() {  # precision eager|compile
  local flag=()
  [[ $2 == compile ]] && flag=(--compile)
  taskset -c "$core" "$python" tools/bench/llama_peer.py --data "$text/train.h5" --steps "$steps" \
    --autocast "$1" "${flag[@]}" > "$out/peer.json" 2> "$out/peer.log" || { cat "$out/peer.log" >&2; exit 1; }
  "$python" -c "import json,sys; print(json.load(open(sys.argv[1]))['tokens_per_sec'])" \
    "$out/peer.json" >> "$out/pytorch_$2-$1"
  cp "$out/peer.json" "$out/peer-$2-$1.json"
}

echo "llama_bench: $repeats repetitions; raw results in $out" >&2
for ((rep = 0; rep < repeats; rep++)); do
  for precision in fp32 bf16; do
    echo "llama_bench: repetition $((rep + 1))/$repeats, $precision" >&2
    if ((rep % 2 == 0)); then
      trellis "$precision"; for p in $peers; do peer "$precision" "$p"; done
    else
      for p in $peers; do peer "$precision" "$p"; done; trellis "$precision"
    fi
  done
done
"$python" - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
runs = {os.path.basename(p): [float(x) for x in open(p)] for p in glob.glob(f"{out}/*-fp32") + glob.glob(f"{out}/*-bf16")}
for name in sorted(runs):
    v = runs[name]
    print(f"{name:24s} median {statistics.median(v):9.0f} tokens/s  (min {min(v):.0f}, max {max(v):.0f}, n {len(v)})")
for prec in ["fp32", "bf16"]:
    t = statistics.median(runs[f"trellis-{prec}"])
    for peer in ["pytorch_eager", "pytorch_compile"]:
        if f"{peer}-{prec}" in runs:
            print(f"{prec}: trellis / {peer} = {t / statistics.median(runs[f'{peer}-{prec}']):.2f}x")
peer = json.load(open(glob.glob(f"{out}/peer-*.json")[0]))
print(f"peer: torch {peer['torch']}, transformers {peer['transformers']}, attention {peer['attn']}")
PY
