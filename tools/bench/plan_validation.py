#!/usr/bin/python3
"""Validate `trellis plan` against measured runs on this machine.

    tools/bench/plan_validation.py [--subset] [--steps N] [--out DIR] [--json FILE]

For each rank count used (1, 2, 4), calibrates this machine with that many ranks
(`mpiexec -n R trellis plan --calibrate`: ranks that share cores measure what each gets),
then for every plan below trains a few steps (`trellis train`, the plan's keys as overrides)
and asks `trellis plan --json` for the same layout on the calibrated machine. Prints the
prediction-against-measurement table (median step time after the first steps; the ledger's
peak memory per rank), the median absolute errors and, per model and rank count, whether the
predicted fastest plan is the measured fastest. --subset runs three plans (the ctest entry
e2e.plan_validation). Exits 1 when a checked target is missed (--check, default all of them):
step, a median absolute error of the step time above 15%; memory, of the peak memory above
5%; best, a predicted fastest plan that is not the measured fastest.

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
# inputs/llama_char.ini, mlp = inputs/fashion_mlp.ini with two hidden layers of 1024.
PLANS = [
    ("gpt 1 fp32", "gpt", 1, {}),
    ("gpt 1 bf16", "gpt", 1, {"precision.mode": "bf16"}),
    ("gpt 1 full recompute", "gpt", 1, {"memory.recompute": "full"}),
    ("gpt dp2", "gpt", 2, {}),
    ("gpt tp2", "gpt", 2, {"parallel.tp": "2"}),
    ("gpt pp2 mb4", "gpt", 2, {"parallel.pp": "2", "train.micro_batch": "4"}),
    ("gpt dp2 zero1 bf16", "gpt", 2, {"parallel.zero": "1", "precision.mode": "bf16"}),
    ("gpt dp2 tp2", "gpt", 4, {"parallel.tp": "2"}),
    ("gpt dp4 zero3", "gpt", 4, {"parallel.zero": "3"}),
    ("gpt dp2 pp2 mb4", "gpt", 4, {"parallel.pp": "2", "train.micro_batch": "4"}),
    ("llama 1 fp32", "llama", 1, {}),
    ("llama tp2 bf16", "llama", 2, {"parallel.tp": "2", "precision.mode": "bf16"}),
    ("llama dp2 pp2 selective", "llama", 4,
     {"parallel.pp": "2", "train.micro_batch": "4", "memory.recompute": "selective"}),
    ("mlp 1", "mlp", 1, {}),
    ("mlp dp2", "mlp", 2, {}),
    ("mlp tp2", "mlp", 2, {"parallel.tp": "2"}),
    ("mlp dp4 zero1", "mlp", 4, {"parallel.zero": "1"}),
    ("mlp dp2 pp2 mb32", "mlp", 4, {"parallel.pp": "2", "train.micro_batch": "32"}),
]
SUBSET = ["gpt 1 fp32", "gpt 1 bf16", "mlp tp2"]


def model_args(model, fashion, text):
    if model == "mlp":
        return ["--config", "inputs/fashion_mlp.ini", "--model.hidden=1024,1024",
                "--train.global_batch=256", f"--data.train={fashion}/train.h5"]
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
        "sequence_parallel": False,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subset", action="store_true")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--out", default="")
    parser.add_argument("--json", default="")
    parser.add_argument("--check", default="step,memory,best",
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
    rows = []
    for name, model, ranks, overrides in plans:
        tag = name.replace(" ", "_")
        base = model_args(model, fashion, text)
        keys = [f"--{k}={v}" for k, v in overrides.items()]
        run_dir = os.path.join(out, tag)
        run([*mpiexec, "-n", str(ranks), binary, "train", *base, *keys, "--data.test=",
             f"--train.max_steps={args.steps}", "--train.eval_interval=0", "--log.interval=1",
             "--log.progress=lines", f"--run.dir={run_dir}"], run_dir + ".log")
        lines = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
        times = [l["step_time_s"] for l in lines if "loss" in l and l.get("step", 0) > 3]
        summary = json.load(open(os.path.join(run_dir, "summary.json")))
        measured_step = statistics.median(times)
        measured_memory = summary["memory_peak_bytes"]
        plan_out = subprocess.run(
            [*mpiexec, "-n", "1", binary, "plan", *base, *keys, "--data.test=",
             "--cluster", machines[ranks], "--json", "--target-samples", "1000",
             "--precision", overrides.get("precision.mode", "fp32")],
            cwd=ROOT, capture_output=True, text=True)
        if plan_out.returncode != 0:
            sys.exit(f"plan_validation: trellis plan failed for {name}: {plan_out.stderr[-2000:]}")
        result = json.loads(plan_out.stdout)
        global_batch = 256 if model == "mlp" else 16
        want = layout_of(overrides, ranks, {"global_batch": global_batch})
        match = [p for p in result["plans"] if all(p[k] == v for k, v in want.items())]
        if not match:
            sys.exit(f"plan_validation: no plan of {name} matches {want}")
        p = match[0]
        if not p["fits"]:
            sys.exit(f"plan_validation: the planner says {name} does not fit: {p['reason']}")
        rows.append({"name": name, "model": model, "ranks": ranks,
                     "measured_step": measured_step, "predicted_step": p["step_seconds"],
                     "measured_memory": measured_memory, "predicted_memory": p["memory_bytes"],
                     "predicted_parts": p["step"]})
        print(f"  {name}: measured {measured_step:.4f} s, predicted {p['step_seconds']:.4f} s",
              file=sys.stderr)
    print("| plan | ranks | step measured | predicted | error | memory measured | predicted | error |")
    print("|---|---|---|---|---|---|---|---|")
    step_errors, memory_errors = [], []
    for r in rows:
        se = r["predicted_step"] / r["measured_step"] - 1
        me = r["predicted_memory"] / r["measured_memory"] - 1
        step_errors.append(abs(se))
        memory_errors.append(abs(me))
        print(f"| {r['name']} | {r['ranks']} | {r['measured_step']*1e3:.1f} ms | "
              f"{r['predicted_step']*1e3:.1f} ms | {se*100:+.1f}% | "
              f"{r['measured_memory']/2**20:.1f} MiB | {r['predicted_memory']/2**20:.1f} MiB | "
              f"{me*100:+.2f}% |")
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
    met = {"step": step_median <= 0.15, "memory": memory_median <= 0.05, "best": best_ok}
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
