#!/usr/bin/env bash
# The per-precision memory table of docs/performance.md: the bench's models (MLP
# 784-1024-1024-10 at batch 256, inputs/fashion_cnn.ini, inputs/gpt_char.ini,
# inputs/llama_char.ini) on one rank for a few steps in fp32, bf16 with emulated kernels and
# bf16 with native kernels (skipped where the host has none: precision.kernels = native
# refuses), and the ledger's peak per category (summary.json's memory_peak: the categories'
# own peaks) beside the process' RSS. Memory does not depend on the machine's load.
#
# usage: tools/bench/precision_memory.sh
# env:   TRELLIS_BIN (build/trellis), FASHION_DIR (data/fashion-mnist), TEXT_DIR (data/austen),
#        STEPS (5), MODELS ("mlp cnn gpt llama"), BENCH_OUT (keep the runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${TRELLIS_BIN:-build/trellis}
fashion=${FASHION_DIR:-data/fashion-mnist}
text=${TEXT_DIR:-data/austen}
steps=${STEPS:-5}
out=${BENCH_OUT:-$(mktemp -d)}
mkdir -p "$out"
for f in "$bin" "$fashion/train.h5" "$text/train.h5"; do
  [[ -e "$f" ]] || { echo "precision_memory: missing $f (make build, make demo / demo-gpt data)" >&2; exit 1; }
done
export OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
model_args() {
  case $1 in
    mlp) echo "--config inputs/fashion_mlp.ini --model.hidden=1024,1024 --train.global_batch=256" \
              "--data.train=$fashion/train.h5" ;;
    cnn) echo "--config inputs/fashion_cnn.ini --data.train=$fashion/train.h5" ;;
    gpt) echo "--config inputs/gpt_char.ini --data.train=$text/train.h5" ;;
    llama) echo "--config inputs/llama_char.ini --data.train=$text/train.h5" ;;
  esac
}
for model in ${MODELS:-mlp cnn gpt llama}; do
  for variant in fp32 bf16-emulated bf16-native; do
    case $variant in
      fp32) precision=(--precision.mode=fp32) ;;
      *) precision=(--precision.mode=bf16 --precision.kernels="${variant#bf16-}") ;;
    esac
    # shellcheck disable=SC2046
    if ! "$bin" train $(model_args "$model") "${precision[@]}" --data.test= \
      --train.max_steps="$steps" --train.eval_interval=0 --log.progress=lines \
      --run.dir="$out/$model-$variant" > "$out/$model-$variant.log" 2>&1; then
      grep -q "precision.kernels = native" "$out/$model-$variant.log" \
        || { echo "precision_memory: $model $variant failed: $(tail -3 "$out/$model-$variant.log")" >&2; exit 1; }
      echo "precision_memory: $model $variant: no native kernels on this host" >&2
    fi
  done
done
python3 - "$out" ${MODELS:-mlp cnn gpt llama} <<'PY'
import json, os, sys
out, models = sys.argv[1], sys.argv[2:]
mib = lambda b: f"{b / 2**20:.1f}"
print("| model | precision | activations | 16-bit copies | workspace | total | RSS |")
print("|---|---|---|---|---|---|---|")
for model in models:
    for variant in ("fp32", "bf16-emulated", "bf16-native"):
        path = f"{out}/{model}-{variant}/summary.json"
        if not os.path.exists(path):
            continue
        s = json.load(open(path))
        m = s["memory_peak"]
        print(f"| {model} | {variant.replace('-', ' ')} | {mib(m['activations'])} | "
              f"{mib(m['half_copies'])} | {mib(m['workspace'])} | "
              f"{mib(s['memory_peak_bytes'])} | {mib(s['host_rss_bytes'])} |")
PY
