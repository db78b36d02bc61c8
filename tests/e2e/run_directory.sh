#!/usr/bin/env bash
# A run never silently replaces another: the same command into the same run.dir is refused at
# once (exit 2, naming --resume auto, another --run.dir and --run.overwrite=true) with every
# file of the earlier run unchanged; --resume auto continues it; --run.overwrite=true deletes
# it (checkpoints included) and starts over; --resume auto with no checkpoint starts over after
# an attempt that never finished, but not over a finished run's model.h5. A run.dir that
# cannot be made is refused at once with exit 2.
source "$(dirname "$0")/common.sh"
mlp=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test="$FASHION_DIR/test.h5" --train.eval_max_samples=500 --log.progress=lines
     --log.interval=1)
run=(--run.dir="$WORK/run")
last_step() { $TRELLIS_PYTHON -c "import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if '\"loss\"' in l][-1]['step'])" "$1/metrics.jsonl"; }
fingerprint() { (cd "$1" && sha256sum model.h5 metrics.jsonl summary.json config.ini checkpoints/*/state.h5); }

trellis_run 2 "${mlp[@]}" "${run[@]}" --train.max_steps=6 --ckpt.interval_steps=3 > "$WORK/first.log"
before=$(fingerprint "$WORK/run")

# The same command again: refused before anything is read or written.
expect_exit 2 "$WORK/again.log" trellis_run 2 "${mlp[@]}" "${run[@]}" --train.max_steps=6 --ckpt.interval_steps=3
grep -q "holds an earlier run (model.h5, metrics.jsonl, summary.json and 2 checkpoints (newest step-0000006))" "$WORK/again.log" \
  || fail "refusal does not say what is there: $(cat "$WORK/again.log")"
for way in "--resume auto" "--run.dir=<new directory>" "--run.overwrite=true"; do
  grep -qF -- "$way" "$WORK/again.log" || fail "refusal does not name $way"
done
[[ $(fingerprint "$WORK/run") == "$before" ]] || fail "the refused run changed the earlier run's files"

# --resume auto continues it.
trellis_run 2 "${mlp[@]}" "${run[@]}" --train.max_steps=9 --ckpt.interval_steps=3 --resume auto > "$WORK/resume.log"
grep -q "resume: .*step-0000006" "$WORK/resume.log" || fail "not resumed: $(tail -3 "$WORK/resume.log")"
[[ $(last_step "$WORK/run") == 9 ]] || fail "resumed run did not reach step 9"

# --resume RUN_DIR: the run's own config.ini and its newest checkpoint, nothing retyped but
# what changes; a directory that is neither a run nor a checkpoint is named as such (exit 2).
(cd "$WORK" && trellis_run 2 train --resume run --train.max_steps=12) > "$WORK/bydir.log" 2>&1
grep -q "resume: .*step-0000009" "$WORK/bydir.log" || fail "--resume RUN_DIR: $(head -20 "$WORK/bydir.log")"
[[ $(last_step "$WORK/run") == 12 ]] || fail "--resume RUN_DIR did not reach step 12"
# The run started 6 steps long and keeps that schedule (the first resume kept it too), saying so.
grep -q "the learning-rate schedule keeps its length of 6 steps" "$WORK/bydir.log" ||
  fail "schedule on resume: $(grep -i schedule "$WORK/bydir.log")"
mkdir -p "$WORK/empty"
expect_exit 2 "$WORK/neither.log" trellis_run 1 train --resume "$WORK/empty"
grep -q "neither a run directory" "$WORK/neither.log" || fail "--resume of an empty directory: $(tail -3 "$WORK/neither.log")"

# --run.overwrite=true deletes it and starts over: no checkpoint of the earlier run is left for
# a later --resume auto to pick up.
trellis_run 1 "${mlp[@]}" "${run[@]}" --train.max_steps=4 --run.overwrite=true > "$WORK/overwrite.log" 2>&1
grep -q "run.overwrite: deleting the earlier run" "$WORK/overwrite.log" || fail "no warning before deleting"
[[ $(last_step "$WORK/run") == 4 ]] || fail "overwritten run: last step $(last_step "$WORK/run")"
[[ -z $(ls "$WORK/run/checkpoints" 2>/dev/null | grep step-) ]] || fail "earlier checkpoints left: $(ls "$WORK/run/checkpoints")"
[[ ! -e "$WORK/run/checkpoints/latest" ]] || fail "earlier checkpoints/latest left"

# --resume auto and no checkpoint: a finished run (model.h5) is refused ...
expect_exit 2 "$WORK/auto.log" trellis_run 1 "${mlp[@]}" "${run[@]}" --train.max_steps=4 --resume auto
grep -q "holds an earlier run (model.h5" "$WORK/auto.log" || fail "resume auto over a finished run: $(tail -3 "$WORK/auto.log")"
# ... an attempt that ended before it finished or checkpointed starts over.
rm "$WORK/run/model.h5" "$WORK/run/summary.json"
trellis_run 1 "${mlp[@]}" "${run[@]}" --train.max_steps=4 --resume auto > "$WORK/auto2.log" 2>&1
grep -q "no checkpoint in .*starting from step 0" "$WORK/auto2.log" || fail "resume auto without checkpoints: $(tail -3 "$WORK/auto2.log")"
# --dry-run checks and writes nothing: over the finished run it is refused as the run would
# be; with run.overwrite it says it would delete, and deletes nothing.
before=$(cd "$WORK/run" && sha256sum model.h5 metrics.jsonl)
expect_exit 2 "$WORK/dry.log" trellis_run 1 "${mlp[@]}" "${run[@]}" --train.max_steps=4 --dry-run
grep -q "holds an earlier run" "$WORK/dry.log" || fail "dry run over a run: $(tail -3 "$WORK/dry.log")"
trellis_run 1 "${mlp[@]}" "${run[@]}" --train.max_steps=4 --run.overwrite=true --dry-run > "$WORK/dry2.log" 2>&1
grep -q "run.overwrite: would delete" "$WORK/dry2.log" || fail "dry run: $(tail -3 "$WORK/dry2.log")"
grep -q "dry run: .* check out; nothing was trained or written" "$WORK/dry2.log" || fail "dry run: $(tail -3 "$WORK/dry2.log")"
[[ $(cd "$WORK/run" && sha256sum model.h5 metrics.jsonl) == "$before" ]] || fail "the dry run changed the run"
trellis_run 1 "${mlp[@]}" --run.dir="$WORK/never" --train.max_steps=4 --dry-run > "$WORK/dry3.log" 2>&1
[[ ! -e "$WORK/never" ]] || fail "the dry run made run.dir"

# A run.dir that cannot be made is a configuration error (exit 2) naming run.dir, before any
# data is read (root ignores permissions; a path under a regular file cannot be a directory).
touch "$WORK/a-file"
expect_exit 2 "$WORK/unwritable.log" trellis_run 2 "${mlp[@]}" --run.dir="$WORK/a-file/run" --train.max_steps=2
grep -q "run.dir $WORK/a-file/run: cannot create it" "$WORK/unwritable.log" || fail "unwritable run.dir: $(tail -3 "$WORK/unwritable.log")"
# trellis runs lists them: the finished one, and the one that never started training.
trellis_run 1 runs "$WORK" > "$WORK/runs.log"
grep -q "^run  *completed  *4  *test accuracy 0\.[0-9]*" "$WORK/runs.log" || fail "runs: $(cat "$WORK/runs.log")"
echo "run.dir: refused, resumed, overwritten, restarted and checked as documented"
