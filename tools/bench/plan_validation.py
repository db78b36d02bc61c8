#!/usr/bin/python3
"""Validate `trellis plan` against measured runs on this machine.

    tools/bench/plan_validation.py [--subset] [--steps N] [--repeat N] [--out DIR] [--json FILE]

For each rank count used (1, 2, 4), calibrates this machine with that many ranks
(`mpiexec -n R trellis plan --calibrate`: ranks that share cores measure what each gets),
then for every plan below trains a few steps (`trellis train`, the plan's keys as overrides)
and asks `trellis plan --json` for the same layout on the calibrated machine. Prints the
prediction-against-measurement table (median step time after the first steps; the ledger's
peak memory per rank), the median absolute errors and, per model and rank count, whether the
predicted fastest plan is the measured fastest; and whether the planner's collectives per
step are those training issued. --repeat N measures every plan N times in
alternating rounds and takes the median (the spread is printed beside it: this machine is
shared and noisy). --subset runs five plans (the ctest entry
e2e.plan_validation). Exits 1 when a checked target is missed (--check, default all of them):
step, a median absolute error of the step time above 15%; memory, of the peak memory above
5%; best, a predicted fastest plan that is not the measured fastest; collectives, a plan
whose predicted collectives per step (calls and bytes; dp bytes within 2%) differ from those rank 0
issued (summary.json "collectives_per_step", counted by the communicators).

Environment: TRELLIS_BIN (build/trellis), FASHION_DIR (data/fashion-mnist), TEXT_DIR
(data/austen), MPIEXEC (mpiexec).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (name, model, ranks, overrides); models: gpt = inputs/gpt_char.ini, llama =
# inputs/llama_char.ini, mlp = inputs/fashion_mlp.ini with two hidden layers of 1024, cnn =
# inputs/fashion_cnn.ini.
PLANS = [
    ("gpt 1 fp32", "gpt", 1, {}),
    ("gpt 1 bf16", "gpt", 1, {"precision.mode": "bf16"}),
    ("gpt 1 full recompute", "gpt", 1, {"memory.recompute": "full"}),
    ("gpt dp2", "gpt", 2, {}),
    ("gpt tp2", "gpt", 2, {"parallel.tp": "2"}),
    ("gpt pp2 mb4", "gpt", 2, {"parallel.pp": "2", "train.micro_batch": "4"}),
    ("gpt pp2 mb2 gpipe", "gpt", 2,
     {"parallel.pp": "2", "train.micro_batch": "2", "parallel.schedule": "gpipe"}),
    ("gpt dp2 zero1 bf16", "gpt", 2, {"parallel.zero": "1", "precision.mode": "bf16"}),
    ("gpt dp2 tp2", "gpt", 4, {"parallel.tp": "2"}),
    ("gpt dp4 zero3", "gpt", 4, {"parallel.zero": "3"}),
    ("gpt dp2 pp2 mb4", "gpt", 4, {"parallel.pp": "2", "train.micro_batch": "4"}),
    ("gpt dp2 zero3 mb4", "gpt", 2, {"parallel.zero": "3", "train.micro_batch": "4"}),
    ("gpt tp2 sp", "gpt", 2, {"parallel.tp": "2", "parallel.sequence_parallel": "true"}),
    ("gpt tp2 full recompute", "gpt", 2, {"parallel.tp": "2", "memory.recompute": "full"}),
    ("llama 1 fp32", "llama", 1, {}),
    ("llama tp2 bf16", "llama", 2, {"parallel.tp": "2", "precision.mode": "bf16"}),
    ("llama dp2 pp2 selective", "llama", 4,
     {"parallel.pp": "2", "train.micro_batch": "4", "memory.recompute": "selective"}),
    ("mlp 1", "mlp", 1, {}),
    ("mlp dp2", "mlp", 2, {}),
    ("mlp tp2", "mlp", 2, {"parallel.tp": "2"}),
    ("mlp dp4 zero1", "mlp", 4, {"parallel.zero": "1"}),
    ("mlp dp2 pp2 mb32", "mlp", 4, {"parallel.pp": "2", "train.micro_batch": "32"}),
    ("mlp dp2 zero2", "mlp", 2, {"parallel.zero": "2"}),
    ("mlp dp2 zero1 mpi", "mlp", 2, {"parallel.zero": "1", "parallel.grad_exchange": "communicator"}),
    ("llama tp2 pp2 mb4", "llama", 4,
     {"parallel.tp": "2", "parallel.pp": "2", "train.micro_batch": "4"}),
    ("llama tp2 sp selective", "llama", 2, {"parallel.tp": "2", "parallel.sequence_parallel": "true",
                                           "memory.recompute": "selective"}),
    ("cnn 1 fp32", "cnn", 1, {}),
    ("cnn 1 bf16", "cnn", 1, {"precision.mode": "bf16"}),
    ("cnn dp2", "cnn", 2, {}),
]
GLOBAL_BATCH = {"gpt": 16, "llama": 16, "mlp": 256, "cnn": 128}
SUBSET = ["gpt 1 fp32", "gpt 1 bf16", "mlp tp2", "gpt dp2 zero3 mb4", "mlp dp2 pp2 mb32"]


def model_args(model, fashion, text):
    if model == "mlp":
        return ["--config", "inputs/fashion_mlp.ini", "--model.hidden=1024,1024",
                "--train.global_batch=256", f"--data.train={fashion}/train.h5"]
    if model == "cnn":
        return ["--config", "inputs/fashion_cnn.ini", f"--data.train={fashion}/train.h5"]
    config = "inputs/gpt_char.ini" if model == "gpt" else "inputs/llama_char.ini"
    return ["--config", config, f"--data.train={text}/train.h5"]


def run(cmd, log):
    with open(log, "w") as f:
        done = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        sys.exit(f"plan_validation: {' '.join(cmd)} failed ({done.returncode}); see {log}")


def calibrate(mpiexec, binary, ranks, out):
    path = os.path.join(out, f"cpu-{ranks}.ini")
    run([*mpiexec, "-n", str(ranks), binary, "plan", "--calibrate", "--name", f"cpu-{ranks}",
         "--cluster", "inputs/clusters/cpu_node.ini", "--out", path], path + ".log")
    # One node of this machine: the plans measured here run on it.
    text = open(path).read()
    lines = [("max_nodes = 1" if l.startswith("max_nodes") else l) for l in text.splitlines()]
    open(path, "w").write("\n".join(lines) + "\n")
    return path


def collective_errors(counted, predicted, dp_tolerance=0.02):
    """Where the planner's collectives differ from those rank 0 issued in its last step: the
    calls and bytes exactly, the dp bytes within `dp_tolerance` (the gradient buffer's
    alignment padding, which the planner leaves out)."""
    errors = []
    for axis in ("tp", "dp", "pp", "embedding"):
        have, want = counted.get(axis, {}), predicted.get(axis, {})
        for kind in sorted(set(have) | set(want)):
            h = have.get(kind, {"calls": 0, "bytes": 0})
            w = want.get(kind, {"calls": 0, "bytes": 0})
            tolerance = dp_tolerance if axis == "dp" else 0
            off = abs(w["bytes"] - h["bytes"]) > tolerance * max(h["bytes"], 1)
            if h["calls"] != w["calls"] or off:
                errors.append(f"{axis} {kind}: issued {h['calls']} calls {h['bytes']:.0f} B, "
                              f"predicted {w['calls']} calls {w['bytes']:.0f} B")
    return errors


def layout_of(config_overrides, ranks, plan_json_config):
    """The plan JSON's layout keys for these overrides (defaults as the config gives them)."""
    tp = int(config_overrides.get("parallel.tp", 1))
    pp = int(config_overrides.get("parallel.pp", 1))
    dp = ranks // (tp * pp)
    return {
        "dp": dp, "tp": tp, "pp": pp,
        "micro_batch": int(config_overrides.get("train.micro_batch",
                                                plan_json_config["global_batch"] // dp)),
        "zero": int(config_overrides.get("parallel.zero", 0)),
        "recompute": config_overrides.get("memory.recompute", "none"),
        "precision": config_overrides.get("precision.mode", "fp32"),
        "sequence_parallel": config_overrides.get("parallel.sequence_parallel") == "true",
        "schedule": config_overrides.get("parallel.schedule", "1f1b"),
    }


def measure(mpiexec, binary, model, ranks, overrides, fashion, text, steps, run_dir):
    """Trains the plan a few steps: the median step time after the first three, the ledger's
    peak memory per rank, and the collectives rank 0 issued in its last step."""
    keys = [f"--{k}={v}" for k, v in overrides.items()]
    run([*mpiexec, "-n", str(ranks), binary, "train", *model_args(model, fashion, text), *keys,
         "--data.test=", f"--train.max_steps={steps}", "--train.eval_interval=0",
         "--log.interval=1", "--log.progress=lines", f"--run.dir={run_dir}",
         "--run.overwrite=true"], run_dir + ".log")
    lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    times = [l["step_time_s"] for l in lines if "loss" in l and l.get("step", 0) > 3]
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    return {"step": statistics.median(times), "memory": summary["memory_peak_bytes"],
            "collectives": summary["collectives_per_step"]}


def predict(mpiexec, binary, model, ranks, overrides, fashion, text, machine, name):
    """The planner's plan of the same layout on the calibrated machine."""
    keys = [f"--{k}={v}" for k, v in overrides.items()]
    plan_out = subprocess.run(
        [*mpiexec, "-n", "1", binary, "plan", *model_args(model, fashion, text), *keys,
         "--data.test=", "--cluster", machine, "--json", "--target-samples", "1000",
         "--precision", overrides.get("precision.mode", "fp32")],
        cwd=ROOT, capture_output=True, text=True)
    if plan_out.returncode != 0:
        sys.exit(f"plan_validation: trellis plan failed for {name}: {plan_out.stderr[-2000:]}")
    result = json.loads(plan_out.stdout)
    want = layout_of(overrides, ranks, {"global_batch": GLOBAL_BATCH[model]})
    match = [p for p in result["plans"] if all(p[k] == v for k, v in want.items())]
    if not match:
        sys.exit(f"plan_validation: no plan of {name} matches {want}")
    if not match[0]["fits"]:
        sys.exit(f"plan_validation: the planner says {name} does not fit: {match[0]['reason']}")
    return match[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=1,
                        help="measure every plan this many times, in alternating rounds")
    parser.add_argument("--out", default="")
    parser.add_argument("--json", default="")
    parser.add_argument("--check", default="step,memory,best,collectives",
                        help="the targets that set the exit status")
    args = parser.parse_args()
    binary = os.environ.get("TRELLIS_BIN", os.path.join(ROOT, "build/trellis"))
    fashion = os.environ.get("FASHION_DIR", os.path.join(ROOT, "data/fashion-mnist"))
    text = os.environ.get("TEXT_DIR", os.path.join(ROOT, "data/austen"))
    mpiexec = os.environ.get("MPIEXEC", "mpiexec").split() + ["--oversubscribe"]
    out = args.out or subprocess.check_output(["mktemp", "-d"], text=True).strip()
    os.makedirs(out, exist_ok=True)
    for path in (binary, f"{fashion}/train.h5", f"{text}/train.h5"):
        if not os.path.exists(path):
            sys.exit(f"plan_validation: missing {path}")
    os.environ.update(OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                      OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    plans = [p for p in PLANS if not args.subset or p[0] in SUBSET]
    machines = {r: calibrate(mpiexec, binary, r, out) for r in sorted({p[2] for p in plans})}
    rounds = {name: [] for name, _, _, _ in plans}
    for round_index in range(args.repeat):  # rounds alternate the plans, so noise spreads
        for name, model, ranks, overrides in plans:
            tag = name.replace(" ", "_") + (f".{round_index}" if round_index else "")
            run_dir = os.path.join(out, tag)
            rounds[name].append(measure(mpiexec, binary, model, ranks, overrides, fashion, text,
                                        args.steps, run_dir))
    rows = []
    for name, model, ranks, overrides in plans:
        measured = rounds[name]
        steps = [m["step"] for m in measured]
        p = predict(mpiexec, binary, model, ranks, overrides, fashion, text, machines[ranks], name)
        step = statistics.median(steps)
        rows.append({"name": name, "model": model, "ranks": ranks,
                     "collective_errors": collective_errors(measured[-1]["collectives"],
                                                            p["collectives_per_step"]),
                     "measured_step": step, "step_spread": (max(steps) - min(steps)) / step,
                     "predicted_step": p["step_seconds"],
                     "measured_memory": measured[-1]["memory"], "predicted_memory": p["memory_bytes"],
                     "predicted_parts": p["step"]})
        print(f"  {name}: measured {step:.4f} s, predicted {p['step_seconds']:.4f} s",
              file=sys.stderr)
    print("| plan | ranks | step measured (spread) | predicted | error | memory measured | "
          "predicted | error |")
    print("|---|---|---|---|---|---|---|---|")
    step_errors, memory_errors = [], []
    for r in rows:
        se = r["predicted_step"] / r["measured_step"] - 1
        me = r["predicted_memory"] / r["measured_memory"] - 1
        step_errors.append(abs(se))
        memory_errors.append(abs(me))
        print(f"| {r['name']} | {r['ranks']} | {r['measured_step']*1e3:.1f} ms "
              f"({r['step_spread']*100:.0f}%) | "
              f"{r['predicted_step']*1e3:.1f} ms | {se*100:+.1f}% | "
              f"{r['measured_memory']/2**20:.1f} MiB | {r['predicted_memory']/2**20:.1f} MiB | "
              f"{me*100:+.2f}% |")
    collective_misses = [r for r in rows if r["collective_errors"]]
    for r in collective_misses:
        for e in r["collective_errors"]:
            print(f"collectives of {r['name']}: {e}")
    print(f"\ncollectives: the predicted calls and bytes of {len(rows) - len(collective_misses)} "
          f"of {len(rows)} plans equal what rank 0 issued (summary.json collectives_per_step)")
    step_median = statistics.median(step_errors)
    memory_median = statistics.median(memory_errors)
    print(f"\nmedian absolute error: step time {step_median*100:.1f}% (target 15%), "
          f"memory {memory_median*100:.2f}% (target 5%)")
    best_ok = True
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["ranks"]), []).append(r)
    for (model, ranks), group in sorted(groups.items()):
        if len(group) < 2:
            continue
        measured = min(group, key=lambda r: r["measured_step"])["name"]
        predicted = min(group, key=lambda r: r["predicted_step"])["name"]
        print(f"best of {model} on {ranks} rank(s): measured {measured}, predicted {predicted}"
              + ("" if measured == predicted else "  <- differs"))
        best_ok &= measured == predicted
    if args.json:
        json.dump({"rows": rows, "step_median_error": step_median,
                   "memory_median_error": memory_median}, open(args.json, "w"), indent=1)
    met = {"step": step_median <= 0.15, "memory": memory_median <= 0.05, "best": best_ok,
           "collectives": not collective_misses}
    checked = [c for c in args.check.split(",") if c]
    for c in checked:
        if c not in met:
            sys.exit(f"plan_validation: --check {c}: expected step, memory or best")
    for c, good in met.items():
        print(f"target {c}: {'met' if good else 'MISSED'}{'' if c in checked else ' (not checked)'}")
    ok = all(met[c] for c in checked)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
