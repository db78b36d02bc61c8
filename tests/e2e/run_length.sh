#!/usr/bin/env bash
# Steps and epochs mean what they say: a positive train.max_steps is the run's length even past
# train.epochs (the data repeats, the next epoch shuffled anew), and the start-up log says which
# key decided; without it, train.epochs passes over the data.
source "$(dirname "$0")/common.sh"
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test= --train.global_batch=2048 --log.progress=lines --log.interval=1)
# 60000 samples / 2048 = 30 steps per epoch (the last one partial).
trellis_run 2 "${mlp[@]}" --train.epochs=1 --train.max_steps=40 --run.dir="$WORK/steps" > "$WORK/steps.log"
grep -q "length: 40 steps (train.max_steps, which overrides train.epochs): 1.33 epochs of 30 steps" "$WORK/steps.log" \
  || fail "no run length line: $(grep length "$WORK/steps.log")"
$TRELLIS_PYTHON - "$WORK/steps/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
assert rows[-1]["step"] == 40, rows[-1]
assert {r["epoch"] for r in rows} == {1, 2}, sorted({r["epoch"] for r in rows})
PY
trellis_run 2 "${mlp[@]}" --train.epochs=2 --run.dir="$WORK/epochs" > "$WORK/epochs.log"
grep -q "length: 60 steps (train.epochs = 2 x 30 steps per epoch)" "$WORK/epochs.log" \
  || fail "no run length line: $(grep length "$WORK/epochs.log")"
echo "run length: train.max_steps past train.epochs, and train.epochs alone, as documented"
