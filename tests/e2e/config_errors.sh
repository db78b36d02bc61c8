#!/usr/bin/env bash
# Bad configuration ends every rank with exit code 2 and a message naming the key, before any
# work starts; a missing data file ends every rank with exit code 3 naming the file.
source "$(dirname "$0")/common.sh"
expect_exit() {
  local want=$1 pattern=$2
  shift 2
  set +e
  "$@" > "$WORK/out.log" 2>&1
  local got=$?
  set -e
  [[ $got -eq $want ]] || { cat "$WORK/out.log"; fail "expected exit $want, got $got: $*"; }
  grep -q -- "$pattern" "$WORK/out.log" || { cat "$WORK/out.log"; fail "no '$pattern' in the output of: $*"; }
}
cfg="$TRELLIS_SRC/inputs/fashion_mlp.ini"
data=(--data.train="$FASHION_DIR/train.h5" --data.test="$FASHION_DIR/test.h5" --run.dir="$WORK/run")
expect_exit 2 "train.global_bach" trellis_run 2 train --config "$cfg" "${data[@]}" --train.global_bach=64
expect_exit 2 "optim.type" trellis_run 2 train --config "$cfg" "${data[@]}" --optim.type=lion
expect_exit 2 "not divisible" trellis_run 4 train --config "$cfg" "${data[@]}" --train.global_batch=66
expect_exit 2 "dp x micro_batch" trellis_run 2 train --config "$cfg" "${data[@]}" --train.micro_batch=48
expect_exit 2 "cannot open config file" trellis_run 2 train --config "$WORK/nope.ini" "${data[@]}"
expect_exit 3 "$WORK/missing.h5" trellis_run 2 train --config "$cfg" "${data[@]}" --data.train="$WORK/missing.h5"
# Integers are checked in their field's own type (4294967297 was narrowed to pp = 1).
expect_exit 2 "parallel.pp = '4294967297'" trellis_run 2 train --config "$cfg" "${data[@]}" --parallel.pp=4294967297
expect_exit 2 "model.d_model" trellis_run 1 train --config "$cfg" "${data[@]}" --model.type=gpt --model.d_model=4294967424
# Absurd sizes name their key instead of ending in vector::reserve or bad_alloc.
expect_exit 2 "train.eval_batch" trellis_run 2 train --config "$cfg" "${data[@]}" --train.eval_batch=9223372036854775807
expect_exit 2 "config key train.global_batch = 1000000000: .* GiB" trellis_run 2 train --config "$cfg" "${data[@]}" --train.global_batch=1000000000
expect_exit 2 "config key model.hidden = .* GiB" trellis_run 2 train --config "$cfg" "${data[@]}" --model.hidden=16777216,16777216
# Smaller ones: a fault rank outside the job, stages without pipeline, hex time limits, raw bytes.
expect_exit 2 "fault.inject = '5:1:throw': rank 5 is outside" trellis_run 2 train --config "$cfg" "${data[@]}" --fault.inject=5:1:throw
expect_exit 2 "parallel.stages" trellis_run 2 train --config "$cfg" "${data[@]}" --parallel.stages=2,1
expect_exit 2 "train.time_limit = '0x10'" trellis_run 2 train --config "$cfg" "${data[@]}" --train.time_limit=0x10
expect_exit 2 'l\\xFFon' trellis_run 2 train --config "$cfg" "${data[@]}" --optim.type=$'l\xffon'
[[ ! -e "$WORK/run/metrics.jsonl" ]] || fail "a failed start must not write metrics"
# A short run of a config with a long warm-up runs, the warm-up cut with a warning.
expect_exit 0 "warm-up cut to 5 steps" trellis_run 2 train --config "$cfg" "${data[@]}" --train.max_steps=5 --log.progress=lines
grep -q "^max_steps = 5$" "$WORK/run/config.ini" || fail "config.ini does not record max_steps"
grep -q "^micro_batch = 64$" "$WORK/run/config.ini" || fail "config.ini does not record the resolved micro_batch"
echo "config errors: ok"
