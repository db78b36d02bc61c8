#!/usr/bin/env bash
# The input pipeline: batches read ahead on the loader thread (data.prefetch) train exactly as
# batches read in the step, with evaluations and checkpoints (which pause the loader: HDF5 is
# not thread-safe) in between; augmented images (data.augment) too, at any rank count.
source "$(dirname "$0")/common.sh"
common=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini"
        --data.train="$FASHION_DIR/train.h5" --data.test="$FASHION_DIR/test.h5" --data.cache=none
        --train.max_steps=40 --train.global_batch=64 --log.interval=1 --train.eval_interval=10
        --train.eval_max_samples=500 --ckpt.interval_steps=15 --sched.warmup_steps=5)
trellis_run 2 "${common[@]}" --data.prefetch=0 --run.dir="$WORK/sync" > "$WORK/sync.log"
trellis_run 2 "${common[@]}" --data.prefetch=3 --run.dir="$WORK/prefetch" > "$WORK/prefetch.log"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 40 "$WORK/sync" "$WORK/prefetch"
grep -q '"test_accuracy"' "$WORK/prefetch/metrics.jsonl" || fail "no evaluation logged"

# Augmented: prefetch on and off bitwise identical; 1 and 2 ranks the same within rounding.
aug=(--data.augment=crop,flip,scale,rotate --data.augment_pad=2 --ckpt.interval_steps=0)
trellis_run 2 "${common[@]}" "${aug[@]}" --data.prefetch=0 --run.dir="$WORK/aug-sync" > "$WORK/aug-sync.log"
trellis_run 2 "${common[@]}" "${aug[@]}" --data.prefetch=2 --run.dir="$WORK/aug" > "$WORK/aug.log"
trellis_run 1 "${common[@]}" "${aug[@]}" --data.prefetch=2 --run.dir="$WORK/aug-np1" > "$WORK/aug-np1.log"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 40 "$WORK/aug-sync" "$WORK/aug"
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 1e-5 --steps 40 "$WORK/aug" "$WORK/aug-np1"
# Augmentation changes the batches: the losses differ from the plain run's.
if "$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol 0 --steps 40 "$WORK/sync" "$WORK/aug" > /dev/null 2>&1; then
  fail "data.augment=crop,flip,scale,rotate trained exactly like no augmentation"
fi

# A bad value is a configuration error (exit 2) naming the key.
set +e
trellis_run 1 "${common[@]}" --data.augment=crop,blur --run.dir="$WORK/bad" > "$WORK/bad.log" 2>&1
code=$?
set -e
[[ $code -eq 2 ]] || fail "data.augment=crop,blur exited $code, expected 2"
grep -q "data.augment" "$WORK/bad.log" || fail "the error does not name data.augment"

# A read error on the loader thread (a label out of range in row 700: global batch 10 of an
# unshuffled run) ends the job at that batch with the reader's message and exit code 3 (input
# error), on 1 and on 2 ranks, within the time limit (no hang).
"$TRELLIS_PYTHON" - "$FASHION_DIR/test.h5" "$WORK/bad.h5" <<'PY'
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r+") as f:
    f["labels"][700] = 99
PY
for np in 1 2; do
  set +e
  TRELLIS_RUN_TIMEOUT=60 trellis_run $np "${common[@]}" --data.train="$WORK/bad.h5" --data.test= \
    --data.shuffle=false --data.prefetch=4 --ckpt.interval_steps=0 --run.dir="$WORK/bad-np$np" > "$WORK/bad-np$np.log" 2>&1
  code=$?
  set -e
  [[ $code -eq 3 ]] || fail "a bad label read on the loader thread exited $code on $np rank(s), expected 3: $(tail -5 "$WORK/bad-np$np.log")"
  grep -q "bad.h5: dataset '/labels': row 700 .* has label 99" "$WORK/bad-np$np.log" || fail "no reader message on $np rank(s)"
  steps=$(grep -c '"loss"' "$WORK/bad-np$np/metrics.jsonl" || true)
  [[ $steps -eq 10 ]] || fail "$steps steps logged before the bad batch 11 on $np rank(s), expected 10"
done
echo "input pipeline: prefetch and augmentation OK"
