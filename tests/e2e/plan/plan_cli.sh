#!/usr/bin/env bash
# `trellis plan` end to end:
#  - gpt_small and llama3_8b on every shipped cluster file: a chosen plan, its sbatch line, its
#    memory equal to what `trellis info` plans for the same layout (one memory plan, two
#    commands);
#  - --json parses, names the chosen plan, and tools/plot_plan draws it (a PNG);
#  - a bad cluster file fails on every rank (2 ranks), naming the file, section and key, exit 2;
#  - --calibrate on 2 ranks writes a machine type that plans read back (calibrated = true).
source "$(dirname "$0")/../common.sh"
py=$TRELLIS_PYTHON
for cluster in onprem cloud cpu_node; do
  trellis_run 1 plan --config "$TRELLIS_SRC/inputs/gpt_small.ini" \
    --cluster "$TRELLIS_SRC/inputs/clusters/$cluster.ini" --target-tokens 1e10 \
    > "$WORK/gpt_$cluster.txt" 2>&1 || fail "plan gpt_small on $cluster: $(tail -5 "$WORK/gpt_$cluster.txt")"
  grep -q "^chosen: #" "$WORK/gpt_$cluster.txt" || fail "no chosen plan on $cluster"
  grep -q "run it: sbatch --nodes=" "$WORK/gpt_$cluster.txt" || fail "no sbatch line on $cluster"
done
trellis_run 1 plan --config "$TRELLIS_SRC/inputs/llama3_8b.ini" \
  --cluster "$TRELLIS_SRC/inputs/clusters/onprem.ini" --target-tokens 1e11 --max-micro-batch 2 \
  --json > "$WORK/llama.json" 2> "$WORK/llama.err" || fail "plan llama3_8b: $(tail -5 "$WORK/llama.err")"
"$py" - "$WORK/llama.json" > "$WORK/chosen.txt" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
best = d["best"]["chosen"]
assert best is not None, d["best"]
p = d["plans"][best]
assert p["fits"] and p["memory_bytes"] <= p["device_memory_bytes"], p
assert any(not q["fits"] and "needs" in q["reason"] for q in d["plans"]), "no memory misfit"
assert d["best"]["sbatch"].startswith("sbatch --nodes="), d["best"]["sbatch"]
print(p["dp"] * p["tp"] * p["pp"], p["tp"], p["pp"], p["zero"], p["recompute"],
      p["micro_batch"], "true" if p["sequence_parallel"] else "false", p["memory_bytes"])
PY
read -r ranks tp pp zero recompute micro sp planned < "$WORK/chosen.txt"
trellis_run 1 info --config "$TRELLIS_SRC/inputs/llama3_8b.ini" --ranks "$ranks" \
  --parallel.tp="$tp" --parallel.pp="$pp" --parallel.zero="$zero" --memory.recompute="$recompute" \
  --train.micro_batch="$micro" --parallel.sequence_parallel="$sp" --precision.kernels=native \
  > "$WORK/info.txt" 2>&1 || fail "info: $(tail -5 "$WORK/info.txt")"
info_gib=$(sed -n 's/.*memory plan per rank.*: \([0-9.]*\) GiB$/\1/p' "$WORK/info.txt")
[[ -n $info_gib ]] || fail "info printed no memory plan in GiB: $(grep 'memory plan' "$WORK/info.txt")"
"$py" -c "import sys; p, i = $planned / 2**30, $info_gib; sys.exit(abs(p - i) > 0.01 * i)" \
  || fail "plan says $planned bytes, info $info_gib GiB for the same layout"
"$py" "$TRELLIS_SRC/tools/plot_plan" "$WORK/llama.json" --out "$WORK/llama.png" > /dev/null \
  || fail "plot_plan"
[[ $(head -c 4 "$WORK/llama.png" | od -An -c | tr -d ' ') == "211PNG" ]] || fail "not a PNG"

# A bad cluster file: every rank says which key, exit 2.
sed 's/^peak_tflops_fp32 = .*/peak_tflops_fp32 = fast/' "$TRELLIS_SRC/inputs/clusters/cpu_node.ini" \
  > "$WORK/bad.ini"
expect_exit 2 "$WORK/bad.log" trellis_run 2 plan --config "$TRELLIS_SRC/inputs/gpt_small.ini" \
  --cluster "$WORK/bad.ini" --target-tokens 1e9
[[ $(grep -c "bad.ini: \[cpu-node\] peak_tflops_fp32 = 'fast'" "$WORK/bad.log") -ge 1 ]] \
  || fail "the error does not name the key: $(tail -3 "$WORK/bad.log")"

# Calibrate this machine on 2 ranks, then plan with it.
trellis_run 2 plan --calibrate --name here --cluster "$TRELLIS_SRC/inputs/clusters/cpu_node.ini" \
  --out "$WORK/here.ini" > "$WORK/calibrate.log" 2>&1 || fail "calibrate: $(tail -5 "$WORK/calibrate.log")"
grep -q "^calibrated = true" "$WORK/here.ini" || fail "calibration not marked"
grep -q "^devices_per_node = 2" "$WORK/here.ini" || fail "calibration: devices_per_node"
trellis_run 1 plan --config "$TRELLIS_SRC/inputs/gpt_small.ini" --cluster "$WORK/here.ini" \
  --target-tokens 1e8 > "$WORK/here.txt" 2>&1 || fail "plan on the calibrated machine"
grep -q "(calibrated)" "$WORK/here.txt" || fail "the chosen plan's machine is not the calibrated one"
echo "plan_cli: ok"
