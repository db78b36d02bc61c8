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
[[ ! -e "$WORK/run/metrics.jsonl" ]] || fail "a failed start must not write metrics"
echo "config errors: ok"
