# Shared by the memory-toolbox scripts (recompute, zero, sequence_parallel), after common.sh:
# a 4-block decoder on the GPL's characters, 6 steps with dropout, and helpers to run it and
# compare runs.
"$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/text_to_tokens.py" --src "$TRELLIS_TEXT_CORPUS" \
  --out-dir "$WORK/tokens" > /dev/null
small=(--data.train="$WORK/tokens/train.h5" --data.test="$WORK/tokens/val.h5" --model.n_layer=4
       --model.n_head=4 --model.d_model=64 --model.seq_len=64 --model.dropout=0.1
       --train.global_batch=8 --train.micro_batch=2 --train.max_steps=6 --train.eval_interval=3
       --train.eval_batch=8 --train.eval_max_samples=16 --log.interval=1 --log.progress=lines)
gpt=(train --config "$TRELLIS_SRC/inputs/gpt_char.ini" "${small[@]}")
llama=(train --config "$TRELLIS_SRC/inputs/llama_char.ini" "${small[@]}" --model.n_kv_head=2)

# run NAME NP ARGS...: a run into $WORK/NAME (log $WORK/NAME.log) that must succeed.
run() {
  local name=$1 np=$2
  shift 2
  trellis_run "$np" "$@" --run.dir="$WORK/$name" > "$WORK/$name.log" 2>&1 \
    || fail "$name: $(tail -5 "$WORK/$name.log")"
}

# same_params RTOL[:ATOL] REFERENCE OTHER...: the final model.h5 of each run equals the
# reference's (RTOL 0: bit for bit; else within RTOL relative and ATOL (1e-5) absolute).
same_params() {
  "$TRELLIS_PYTHON" - "$WORK" "$@" <<'PY' || fail "final parameters differ: $*"
import sys, h5py, numpy as np
w, tol, ref, others = sys.argv[1], sys.argv[2].split(":"), sys.argv[3], sys.argv[4:]
rtol, atol = float(tol[0]), float(tol[1]) if len(tol) > 1 else 1e-5
a = h5py.File(f"{w}/{ref}/model.h5", "r")
for other in others:
    b = h5py.File(f"{w}/{other}/model.h5", "r")
    assert sorted(a["params"]) == sorted(b["params"]), other
    for k in a["params"]:
        x, y = a["params"][k][()], b["params"][k][()]
        ok = np.array_equal(x, y) if rtol == 0 else np.allclose(x, y, rtol=rtol, atol=atol)
        assert x.shape == y.shape and ok, (other, k)
PY
}

# close RTOL REFERENCE OTHER...: every step's loss within RTOL, and the final parameters
# (within 10 x RTOL).
close() {
  local rtol=$1
  shift
  "$TRELLIS_PYTHON" "$TRELLIS_SRC/tools/compare_losses.py" --rtol "$rtol" --steps 6 "$WORK/$1" \
    "${@/#/$WORK/}" || fail "losses differ: $*"
  same_params "$("$TRELLIS_PYTHON" -c "print(10 * $rtol)")" "$@"
}
