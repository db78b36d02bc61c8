#!/usr/bin/env python3
"""Step-time breakdown per process-grid layout from the metrics.jsonl of benchmark runs.

usage: layout_table.py [--skip N] RUNS_DIR LAYOUT...
RUNS_DIR holds one directory per run, named <layout>-<repeat>. For each run, the median of
each per-step time over the logged steps after the first N; for each layout, the median over
repeats and the spread (min..max) of the step time.
"""
import argparse
import glob
import json
import os
import statistics

FIELDS = [("step_time_s", "step"), ("compute_time_s", "compute"), ("tp_comm_time_s", "tp comm"),
          ("comm_time_s", "dp comm"), ("pipeline_time_s", "pipeline"),
          ("optimizer_time_s", "optimizer"), ("data_time_s", "data")]


def run_medians(run_dir, skip):
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))
            if '"loss"' in line]
    rows = [r for r in rows if r["step"] > skip] or rows
    return {key: statistics.median(r.get(key, 0.0) for r in rows) for key, _ in FIELDS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", type=int, default=3, help="steps to leave out (warm-up)")
    parser.add_argument("runs")
    parser.add_argument("layouts", nargs="+")
    args = parser.parse_args()
    header = f"{'layout':<12}" + "".join(f"{label + ' ms':>16}" for _, label in FIELDS) + "  step spread ms"
    print(header)
    for layout in args.layouts:
        runs = sorted(glob.glob(os.path.join(args.runs, f"{layout}-[0-9]*")))
        if not runs:
            continue
        per_run = [run_medians(r, args.skip) for r in runs]
        med = {key: statistics.median(p[key] for p in per_run) for key, _ in FIELDS}
        steps = [p["step_time_s"] for p in per_run]
        print(f"{layout:<12}" + "".join(f"{1e3 * med[key]:>16.2f}" for key, _ in FIELDS)
              + f"  [{1e3 * min(steps):.1f} .. {1e3 * max(steps):.1f}]")


if __name__ == "__main__":
    main()
