#!/usr/bin/env python3
"""PyTorch reference for the Fashion-MNIST MLP benchmark (run with Debian's /usr/bin/python3).

Trains the same network as inputs/fashion_mlp.ini (784-256-128-10, ReLU, SGD with Nesterov
momentum and weight decay, batch 128) on the same HDF5 file, with the whole training set in
memory as a float tensor (what a PyTorch user would do for a dataset this small), and prints
one JSON line with the samples/s measured after the first step.

usage: torch_mlp_reference.py --data data/fashion-mnist/train.h5 --steps 300 --threads 1
"""
import argparse
import json
import time

import h5py
import numpy as np
import torch


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--hidden", default="256,128")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=1234)
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    with h5py.File(args.data, "r") as f:
        raw = f["samples"][...]
        labels = torch.from_numpy(f["labels"][...].astype(np.int64))
        scale = float(np.asarray(f.attrs["scale"]).reshape(-1)[0])
        mean = float(np.asarray(f.attrs["mean"]).reshape(-1)[0])
        std = float(np.asarray(f.attrs["std"]).reshape(-1)[0])
    x = torch.from_numpy(((raw.reshape(len(raw), -1).astype(np.float32) * scale) - mean) / std)

    widths = [x.shape[1]] + [int(h) for h in args.hidden.split(",")]
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(widths[-1], 10))
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    loss_fn = torch.nn.CrossEntropyLoss()

    n = x.shape[0]
    start = None
    for step in range(args.steps):
        idx = torch.randint(0, n, (args.batch,))
        xb, yb = x[idx], labels[idx]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        if step == 0:
            start = time.perf_counter()
    elapsed = time.perf_counter() - start
    print(json.dumps({"framework": "pytorch " + torch.__version__, "threads": args.threads,
                      "steps": args.steps, "samples_per_sec": (args.steps - 1) * args.batch / elapsed,
                      "final_loss": float(loss)}))


if __name__ == "__main__":
    main()
