#!/usr/bin/env python3
"""tools/plot_trace draws a small trace (nested spans, an async span, two ranks) into a PNG,
keeps a --steps window, and exits 2 on a missing file."""
import json
import os
import subprocess
import sys
import tempfile

tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "plot_trace")
with tempfile.TemporaryDirectory() as tmp:
    events = []
    for pid in (0, 1):
        events += [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"rank {pid}"}},
                   {"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "main"}}]
        for step in (1, 2):
            t = 1000.0 * step
            events += [{"ph": "X", "cat": "step", "name": "step", "pid": pid, "tid": 0, "ts": t, "dur": 900, "args": {"step": step}},
                       {"ph": "X", "cat": "compute", "name": "forward", "pid": pid, "tid": 0, "ts": t + 10, "dur": 300, "args": {"micro_batch": 0}},
                       {"ph": "X", "cat": "compute", "name": "backward", "pid": pid, "tid": 0, "ts": t + 320, "dur": 400, "args": {"micro_batch": 0}},
                       {"ph": "b", "cat": "comm", "name": "gradient bucket reduction", "pid": pid, "tid": 0, "id": step, "ts": t + 500},
                       {"ph": "e", "cat": "comm", "name": "gradient bucket reduction", "pid": pid, "tid": 0, "id": step, "ts": t + 800}]
    trace = os.path.join(tmp, "trace.json")
    json.dump({"traceEvents": events}, open(trace, "w"))
    for extra in ([], ["--steps", "2:2"]):
        out = os.path.join(tmp, "t.png")
        subprocess.run([sys.executable, tool, trace, "--out", out] + extra, check=True, capture_output=True)
        assert open(out, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
        os.remove(out)
    missing = subprocess.run([sys.executable, tool, os.path.join(tmp, "none.json")], capture_output=True, text=True)
    assert missing.returncode == 2 and "none.json" in missing.stderr, missing
print("plot_trace: ok")
