#!/usr/bin/env bash
# monitor.trace: a 2-rank pipeline run (pp=2, 8 micro-batches, an evaluation and a checkpoint
# inside the window) writes one Chrome trace / Perfetto JSON file: valid trace-event JSON, one
# process per rank with named thread tracks, spans that nest on each track, every micro-batch's
# forward and backward on each stage, gradient buckets as async spans, and per step the spans
# agree with the step-time split of metrics.jsonl within 5% of the step. A bad
# monitor.trace_steps is refused with exit 2.
source "$(dirname "$0")/common.sh"
run=(train --config "$TRELLIS_SRC/inputs/fashion_mlp.ini" --data.train="$FASHION_DIR/train.h5"
     --data.test="$FASHION_DIR/test.h5" --train.eval_max_samples=512 --train.eval_interval=4
     --train.max_steps=8 --log.interval=1 --parallel.pp=2 --train.micro_batch=16
     --ckpt.interval_steps=4 --monitor.trace_steps=3:5)
trellis_run 2 "${run[@]}" --monitor.trace="$WORK/traces/" --run.dir="$WORK/run" > "$WORK/run.log" 2>&1 ||
  fail "the traced run failed: $(tail -5 "$WORK/run.log")"
[[ -f $WORK/traces/trace.json ]] || fail "no trace.json in the monitor.trace directory"

"$TRELLIS_PYTHON" - "$WORK/traces/trace.json" "$WORK/run/metrics.jsonl" <<'PY'
import collections, json, sys
trace, metrics = sys.argv[1], sys.argv[2]
events = json.load(open(trace))["traceEvents"]
def check(ok, what):
    if not ok:
        sys.exit(f"FAIL: {what}")
for e in events:
    check(e.get("ph") in ("X", "M", "b", "e") and "pid" in e and "name" in e, f"malformed event {e}")
    if e["ph"] in ("X", "b", "e"):
        check(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, f"bad ts {e}")
    if e["ph"] == "X":
        check(e.get("dur", -1) >= 0 and "tid" in e and "cat" in e, f"bad span {e}")
pids = {e["pid"] for e in events}
check(pids == {0, 1}, f"processes {pids}, expected ranks 0 and 1")
for pid in pids:
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["pid"] == pid and e["name"] == "thread_name"}
    check({"main", "loader"} <= names, f"rank {pid} tracks {names}")
    check(any(e["name"] == "process_name" and e["pid"] == pid for e in events), f"rank {pid} unnamed")

# Async spans: every begin has its end, not before it.
begins = {(e["pid"], e["id"]): e["ts"] for e in events if e["ph"] == "b"}
ends = {(e["pid"], e["id"]): e["ts"] for e in events if e["ph"] == "e"}
check(begins.keys() == ends.keys() and begins, "unmatched async spans")
check(all(ends[k] >= begins[k] for k in begins), "an async span ends before it begins")

# Spans nest on each track (1 us of slack for the printed rounding).
spans = collections.defaultdict(list)
for e in events:
    if e["ph"] == "X":
        spans[(e["pid"], e["tid"])].append(e)
for track, es in spans.items():
    stack = []
    for e in sorted(es, key=lambda e: (e["ts"], -e["dur"])):
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - 1e-3:
            stack.pop()
        if stack:
            outer = stack[-1]
            check(e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + 1.0,
                  f"{e['name']} at {e['ts']} overlaps {outer['name']} on track {track}")
        stack.append(e)

# Steps 3-5 only, each stage with 8 forwards and 8 backwards per step.
rows = {r["step"]: r for r in map(json.loads, open(metrics)) if "step_time_s" in r}
for pid in pids:
    steps = sorted(e["args"]["step"] for e in events if e["ph"] == "X" and e["pid"] == pid and e["name"] == "step")
    check(steps == [3, 4, 5], f"rank {pid} traced steps {steps}")
    for name in ("forward", "backward"):
        n = sum(1 for e in events if e["ph"] == "X" and e["pid"] == pid and e["name"] == name)
        check(n == 24, f"rank {pid}: {n} {name} spans, expected 3 steps x 8 micro-batches")
    for name in ("evaluation", "checkpoint"):
        check(any(e["name"] == name and e["pid"] == pid for e in events), f"rank {pid}: no {name} span")

# Rank 0's spans against its step-time split in metrics.jsonl.
def inside(step):
    return [e for e in events if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == step["tid"]
            and e["ts"] >= step["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"] + 1.0]
for step in (e for e in events if e["ph"] == "X" and e["pid"] == 0 and e["name"] == "step"):
    r = rows[step["args"]["step"]]
    total = r["step_time_s"] * 1e6
    spans_in = inside(step)
    got = lambda name: sum(e["dur"] for e in spans_in if e["name"] == name)
    pairs = [("step", step["dur"], total),
             ("data", got("data"), r["data_time_s"] * 1e6),
             # (the engine's own clocks: each micro-batch's forward and backward, the p2p)
             ("forward, backward, p2p", got("forward") + got("backward") + got("pipeline p2p"),
              (r["compute_time_s"] + r["tp_comm_time_s"] + r["pipeline_time_s"]) * 1e6),
             ("gradient reduction (exposed)", got("gradient reduction (exposed)"), r["comm_time_s"] * 1e6),
             ("optimizer", got("optimizer"), r["optimizer_time_s"] * 1e6)]
    for name, span_us, metric_us in pairs:
        check(abs(span_us - metric_us) <= 0.05 * total,
              f"step {step['args']['step']}: {name} spans {span_us:.0f} us, metrics {metric_us:.0f} us (step {total:.0f} us)")
print(f"trace: {len(events)} events, 2 ranks, spans nest and match metrics.jsonl within 5% of each step")
PY

# A window that is not first:last is refused before training, naming the key.
expect_exit 2 "$WORK/bad.log" trellis_run 1 "${run[@]}" --parallel.pp=1 --monitor.trace="$WORK/t.json" \
  --monitor.trace_steps=5 --run.dir="$WORK/bad"
grep -q "monitor.trace_steps" "$WORK/bad.log" || fail "the bad window was not named: $(tail -3 "$WORK/bad.log")"
echo "trace: ok"
