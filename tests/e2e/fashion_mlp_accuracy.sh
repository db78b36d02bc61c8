#!/usr/bin/env bash
# The demo configuration reaches at least 85% Fashion-MNIST test accuracy within 3 epochs on
# 2 ranks, and the run directory holds the resolved config, metrics and final weights that
# `trellis eval` reproduces.
source "$(dirname "$0")/common.sh"
run="$WORK/fashion"
trellis_run 2 train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5" \
  --data.test="$FASHION_DIR/test.h5" --run.dir="$run" | tee "$WORK/train.log"
for f in config.ini metrics.jsonl model.h5; do [[ -s "$run/$f" ]] || fail "missing $run/$f"; done
"$TRELLIS_PYTHON" - "$run/metrics.jsonl" <<'PY'
import json, sys
evals = [json.loads(l) for l in open(sys.argv[1]) if "test_accuracy" in l]
assert len(evals) == 3, f"expected 3 evaluations, got {len(evals)}"
acc = evals[-1]["test_accuracy"]
print(f"final test accuracy {acc:.4f}")
assert acc >= 0.85, f"test accuracy {acc:.4f} < 0.85"
steps = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
for key in ("step", "epoch", "loss", "lr", "samples_per_sec", "step_time_s"):
    assert all(key in s for s in steps), f"metrics line without {key}"
PY
trellis_run 1 eval --weights "$run/model.h5" --data "$FASHION_DIR/test.h5" | tee "$WORK/eval.log"
"$TRELLIS_PYTHON" - "$run/metrics.jsonl" "$WORK/eval.log" <<'PY'
import json, re, sys
last = [json.loads(l) for l in open(sys.argv[1]) if "test_accuracy" in l][-1]
m = re.search(r"accuracy ([0-9.]+)", open(sys.argv[2]).read())
assert m, "eval printed no accuracy"
assert abs(float(m.group(1)) - last["test_accuracy"]) < 1e-4, (m.group(1), last["test_accuracy"])
PY
echo "fashion mlp: ok"
