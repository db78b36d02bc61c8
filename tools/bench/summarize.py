#!/usr/bin/python3
"""Tables of a tools/bench/run_bench.sh run, one per precision: median [min .. max] per side
(Trellis, PyTorch eager, PyTorch compiled), the ratios per repetition (median and spread),
2-rank data-parallel efficiency, the MLP's GEMM share.

    summarize.py RAW_DIR

RAW_DIR holds one file per series, one value per repetition: <side>[_<precision>]-<model>-np<N>
with side trellis, pytorch (eager) or pytorch_compiled (torch.compile) and precision bf16 or
fp16 (fp32: none), optionally baseline-<model>-np<N>, peer (the PyTorch build), and gemm-rate
(JSON lines of trellis_gemm_rate).
"""
import json
import os
import platform
import statistics
import sys

UNITS = {"mlp": "samples/s", "cnn": "samples/s", "gpt": "tokens/s"}
BATCH = {"mlp": 256, "cnn": 128, "gpt": 16}


def load(out, name):
    path = os.path.join(out, name)
    return [float(line) for line in open(path) if line.strip()] if os.path.exists(path) else []


def spread(xs, digits=0):
    if not xs:
        return "n/a"
    f = f"{{:.{digits}f}}"
    return f"{f.format(statistics.median(xs))} [{f.format(min(xs))} .. {f.format(max(xs))}]"


def host():
    model, flags = platform.processor() or "?", ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                flags = " ".join(f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_int8")
                                 if f in have)
                break
    except OSError:
        pass
    return f"{model} ({os.cpu_count()} cores; {flags})"


SIDES = [("trellis", "Trellis"), ("pytorch", "eager"), ("pytorch_compiled", "compiled")]


def series(side, precision, model, np):
    prefix = side if precision == "fp32" else f"{side}_{precision}"
    return f"{prefix}-{model}-np{np}"


def main():
    out = sys.argv[1]
    print(f"host: {host()}")
    peer = os.path.join(out, "peer")
    if os.path.exists(peer):
        print(f"peer: {open(peer).read().strip()}")
    has_baseline = any(n.startswith("baseline-") for n in os.listdir(out))
    per_rank = {}
    for precision in ("fp32", "bf16", "fp16"):
        rows = [(m, np) for m in ("mlp", "cnn", "gpt") for np in (1, 2)
                if load(out, series("trellis", precision, m, np))]
        if not rows:
            continue
        print(f"\n{precision}" + (" (Trellis precision.mode; PyTorch under torch.autocast('cpu', "
                                  f"{precision}))" if precision != "fp32" else ""))
        head = "".join(f"  {name:>24}" for _, name in SIDES)
        print(f"{'model':<5} {'ranks':>5}{head}  {'vs eager':>18}  {'vs compiled':>18}", end="")
        print(f"  {'vs trellis fp32':>18}" if precision != "fp32" else "", end="")
        print(f"  {'baseline trellis':>24}" if has_baseline and precision == "fp32" else "")
        for model, np in rows:
            t, e, c = (load(out, series(side, precision, model, np)) for side, _ in SIDES)
            if precision == "fp32":
                per_rank[(model, np)] = t
            ratio = lambda a, b: spread([x / y for x, y in zip(a, b)], 2) if b else "n/a"
            line = f"{model:<5} {np:>5}" + "".join(f"  {spread(x):>24}" for x in (t, e, c))
            line += f"  {ratio(t, e):>18}  {ratio(t, c):>18}"
            if precision != "fp32":
                line += f"  {ratio(t, load(out, series('trellis', 'fp32', model, np))):>18}"
            elif has_baseline:
                line += f"  {spread(load(out, f'baseline-{model}-np{np}')):>24}"
            print(line)
    print(f"(units: {', '.join(f'{m} {u}' for m, u in UNITS.items())}; median [min .. max] over "
          "the repetitions; ratios = Trellis / PyTorch per repetition; 1 rank vs 1 process x 1 "
          "thread, 2 ranks vs DDP over gloo, 2 processes x 1 thread; compiled = torch.compile, "
          "compilation outside the timing)")
    for model in ("mlp", "cnn", "gpt"):
        one, two = per_rank.get((model, 1)), per_rank.get((model, 2))
        if one and two:
            eff = [b / (2 * a) for a, b in zip(one, two)]
            print(f"{model}: 2-rank data-parallel efficiency {spread([100 * e for e in eff])} %")
    gemm = [json.loads(line) for line in open(os.path.join(out, "gemm-rate"))] \
        if os.path.exists(os.path.join(out, "gemm-rate")) else []
    mlp = per_rank.get(("mlp", 1))
    if gemm and mlp:
        # Per repetition: the time the step's GEMMs alone take at the SGEMM rate, over the step time.
        shares = [100 * g["gemm_seconds_per_step"] / (BATCH["mlp"] / s) for g, s in zip(gemm, mlp)]
        rates = [g["gemm_gflops"] for g in gemm]
        print(f"mlp: single-thread SGEMM on the step's GEMM shapes {spread(rates, 1)} GFLOP/s; "
              f"the 1-rank step runs at {spread(shares)} % of that rate")


if __name__ == "__main__":
    main()
