#!/usr/bin/python3
"""Table of a tools/bench/run_bench.sh run: median [min .. max] per side, the ratio per repetition
(Trellis / PyTorch, median and spread), 2-rank data-parallel efficiency, the MLP's GEMM share.

    summarize.py RAW_DIR

RAW_DIR holds one file per series, one value per repetition: trellis-<model>-np<N>,
pytorch-<model>-np<N>, optionally baseline-<model>-np<N>, and gemm-rate (JSON lines of
trellis_gemm_rate).
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


def main():
    out = sys.argv[1]
    print(f"host: {host()}")
    print(f"{'model':<5} {'ranks':>5}  {'trellis':>26}  {'pytorch':>26}  {'ratio':>20}", end="")
    has_baseline = any(n.startswith("baseline-") for n in os.listdir(out))
    print(f"  {'baseline trellis':>26}" if has_baseline else "")
    per_rank = {}
    for model in ("mlp", "cnn", "gpt"):
        for np in (1, 2):
            t = load(out, f"trellis-{model}-np{np}")
            p = load(out, f"pytorch-{model}-np{np}")
            if not t:
                continue
            per_rank[(model, np)] = t
            ratios = [a / b for a, b in zip(t, p)]
            line = (f"{model:<5} {np:>5}  {spread(t):>26}  {spread(p):>26}  {spread(ratios, 2):>20}")
            if has_baseline:
                line += f"  {spread(load(out, f'baseline-{model}-np{np}')):>26}"
            print(line)
    print(f"(units: {', '.join(f'{m} {u}' for m, u in UNITS.items())}; ratio = Trellis / PyTorch "
          "per repetition; 1 rank vs eager 1 thread, 2 ranks vs DDP gloo 2 x 1 thread)")
    for model in ("mlp", "cnn", "gpt"):
        one, two = per_rank.get((model, 1)), per_rank.get((model, 2))
        if one and two:
            eff = [b / (2 * a) for a, b in zip(one, two)]
            print(f"{model}: 2-rank data-parallel efficiency {spread([100 * e for e in eff])} %")
    for precision in ("bf16", "fp16"):
        rows = []
        for model in ("mlp", "cnn", "gpt"):
            t16 = load(out, f"trellis_{precision}-{model}-np1")
            p16 = load(out, f"pytorch_{precision}-{model}-np1")
            t32 = load(out, f"trellis-{model}-np1")
            if t16:
                rows.append((model, t16, p16, t32))
        if not rows:
            continue
        print(f"{precision} at 1 rank (Trellis precision.mode={precision}; PyTorch under "
              f"torch.autocast('cpu', {precision})):")
        print(f"{'model':<5}  {'trellis ' + precision:>26}  {'pytorch autocast':>26}  "
              f"{'vs pytorch':>18}  {'vs trellis fp32':>18}  {'pytorch vs fp32':>18}")
        for model, t16, p16, t32 in rows:
            p32 = load(out, f"pytorch-{model}-np1")
            print(f"{model:<5}  {spread(t16):>26}  {spread(p16):>26}  "
                  f"{spread([a / b for a, b in zip(t16, p16)], 2):>18}  "
                  f"{spread([a / b for a, b in zip(t16, t32)], 2):>18}  "
                  f"{spread([a / b for a, b in zip(p16, p32)], 2):>18}")
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
