#!/usr/bin/python3
"""Compares the per-step training loss of several runs' metrics.jsonl files.

usage: compare_losses.py --rtol 1e-5 --steps 50 [--window 50] REFERENCE_RUN_DIR OTHER_RUN_DIR [...]

Exits 1 (printing the first mismatches) unless every run logged the same steps as the
reference and every loss agrees within the relative tolerance. With --window W, the means of
consecutive windows of W logged steps are compared instead of single steps (loss curves of
runs that differ in rounding, e.g. bf16 against fp32). Standard library only.
"""
import argparse
import json
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trellis_env  # noqa: E402

if __name__ == "__main__":
    trellis_env.reexec()  # before numpy and h5py: the tools' Python, whichever started this



def step_losses(run_dir):
    losses = {}
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record and "step" in record:
                losses[record["step"]] = record["loss"]
    return losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--steps", type=int, default=0, help="require exactly this many logged steps")
    parser.add_argument("--window", type=int, default=1, help="compare means of this many steps")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()

    reference = step_losses(args.runs[0])
    if args.steps and len(reference) != args.steps:
        print(f"{args.runs[0]}: expected {args.steps} logged steps, found {len(reference)}")
        return 1
    failed = False
    for run in args.runs[1:]:
        other = step_losses(run)
        if sorted(other) != sorted(reference):
            print(f"{run}: logged steps differ from {args.runs[0]}")
            failed = True
            continue
        worst = 0.0
        steps = sorted(reference)
        for first in range(0, len(steps), args.window):
            window = steps[first:first + args.window]
            a = sum(reference[s] for s in window) / len(window)
            b = sum(other[s] for s in window) / len(window)
            rel = abs(a - b) / max(abs(a), 1e-30)
            worst = max(worst, rel)
            where = f"step {window[0]}" if len(window) == 1 else f"steps {window[0]}-{window[-1]} (mean)"
            if rel > args.rtol:
                print(f"{run}: {where}: loss {b!r} vs {a!r} (relative difference {rel:.3g} > {args.rtol})")
                failed = True
        print(f"{run}: {len(other)} steps, worst relative difference {worst:.3g}"
              + (f" over windows of {args.window}" if args.window > 1 else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
