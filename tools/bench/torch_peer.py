#!/usr/bin/python3
"""PyTorch peer of a Trellis benchmark model: the same model, batch and optimizer, data in memory.

    torch_peer.py --model mlp|cnn|gpt --data FILE [--steps N] [--warmup W] [--autocast bf16]
                  [--compile]

--compile runs the module through torch.compile (PyTorch 2; inductor's C++ CPU code): the
warm-up steps compile it, so compilation is not in the timing. With PyTorch 2 the GPT's
attention is F.scaled_dot_product_attention (causal, fused), its fastest CPU path; PyTorch 1.13
(Debian's, the fallback peer) runs it written out.

One process is PyTorch eager with one thread. Several processes are DistributedDataParallel over
gloo, each with one thread, started by the caller with MASTER_ADDR, MASTER_PORT, RANK and
WORLD_SIZE set (Debian's torch 1.13 launcher fails under Python 3.11, so run_bench.sh starts
them itself). The global batch is split over the processes as Trellis splits it over ranks.

Prints one JSON line on rank 0: samples_per_sec and tokens_per_sec over the timed steps (after
`warmup` untimed steps), the final loss and the framework version.

The models mirror Trellis's:
  mlp  784-1024-1024-10, ReLU, batch 256, SGD momentum 0.9 nesterov, weight decay 5e-4
       (inputs/fashion_mlp.ini with model.hidden=1024,1024 and train.global_batch=256)
  cnn  inputs/fashion_cnn.ini: stem conv-bn-relu, ResNet BasicBlocks 16-32-64, global average
       pool, linear; batch 128, SGD momentum 0.9 nesterov, weight decay 5e-4, training-mode BN
  gpt  inputs/gpt_char.ini: nanoGPT with written-out attention (torch 1.13 has no fused
       attention), L4 H4 D128 T128, vocab 256, batch 16, AdamW (beta2 0.99, wd 0.1), clipping 1.0
"""
import argparse
import json
import os
import sys
import time

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from torch_ref_cnn import Cnn  # noqa: E402  (the reference-test model, same layout as Trellis)
from torch_ref_gpt import GPT  # noqa: E402

MODELS = {
    "mlp": dict(batch=256, hidden=(1024, 1024)),
    "cnn": dict(batch=128, widths=(16, 32, 64)),
    "gpt": dict(batch=16, n_layer=4, n_head=4, d_model=128, seq_len=128),
}


def load_images(path):
    with h5py.File(path, "r") as f:
        raw = f["samples"][...]
        labels = torch.from_numpy(f["labels"][...].astype(np.int64))
        scale = float(np.asarray(f.attrs["scale"]).reshape(-1)[0])
        mean = float(np.asarray(f.attrs["mean"]).reshape(-1)[0])
        std = float(np.asarray(f.attrs["std"]).reshape(-1)[0])
    x = torch.from_numpy((raw.astype(np.float32) * scale - mean) / std)
    return x, labels


def load_tokens(path):
    with h5py.File(path, "r") as f:
        tokens = f["tokens"][...].astype(np.int64)
        vocab = int(f.attrs["vocab_size"])
    return torch.from_numpy(tokens), vocab


def fused_attention(self, x):
    """CausalSelfAttention.forward through PyTorch 2's fused scaled-dot-product attention."""
    B, T, C = x.size()
    q, k, v = self.c_attn(x).split(C, dim=2)
    hd = C // self.n_head
    q, k, v = (t.view(B, T, self.n_head, hd).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


def build(model, data, gen):
    """Returns (module, optimizer, next_batch(local) -> (inputs, targets), items per sample)."""
    spec = MODELS[model]
    if model in ("mlp", "cnn"):
        x, labels = load_images(data)
        if model == "mlp":
            x = x.reshape(len(x), -1)
            widths = [x.shape[1], *spec["hidden"]]
            layers = []
            for a, b in zip(widths[:-1], widths[1:]):
                layers += [nn.Linear(a, b), nn.ReLU()]
            layers.append(nn.Linear(widths[-1], 10))
            module = nn.Sequential(*layers)
            opt = torch.optim.SGD(module.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                                  weight_decay=5e-4)
        else:
            module = Cnn(x.shape[1], 10, list(spec["widths"]), 1)
            opt = torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                  weight_decay=5e-4)

        def next_batch(local):
            idx = torch.randint(0, len(x), (local,), generator=gen)
            return x[idx], labels[idx]

        return module, opt, next_batch, 1

    tokens, vocab = load_tokens(data)
    T = spec["seq_len"]
    module = GPT(vocab, T, spec["d_model"], spec["n_head"], spec["n_layer"])
    if hasattr(F, "scaled_dot_product_attention"):
        for block in module.modules():
            if type(block).__name__ == "CausalSelfAttention":
                block.forward = fused_attention.__get__(block)
    decay = [p for p in module.parameters() if p.dim() >= 2]
    no_decay = [p for p in module.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.99))

    def next_batch(local):
        start = torch.randint(0, len(tokens) - T - 1, (local,), generator=gen)
        window = torch.stack([tokens[s:s + T + 1] for s in start.tolist()])
        return window[:, :-1], window[:, 1:]

    return module, opt, next_batch, T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--autocast", choices=["fp32", "bf16"], default="fp32",
                    help="bf16: forward and loss under torch.autocast('cpu', torch.bfloat16)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the module (compiled during the warm-up steps)")
    args = ap.parse_args()
    if args.compile and not hasattr(torch, "compile"):
        sys.exit(f"torch_peer: --compile needs PyTorch 2, this is {torch.__version__}")

    torch.set_num_threads(1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        torch.distributed.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed + rank)

    module, opt, next_batch, items = build(args.model, args.data, gen)
    batch = MODELS[args.model]["batch"]
    if batch % world:
        sys.exit(f"torch_peer: global batch {batch} does not divide over {world} processes")
    local = batch // world
    net = nn.parallel.DistributedDataParallel(module) if world > 1 else module
    if args.compile:
        net = torch.compile(net)
    clip = args.model == "gpt"

    def step():
        inputs, targets = next_batch(local)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            out = net(inputs)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
        loss.backward()
        if clip:
            nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    if world > 1:
        torch.distributed.barrier()
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    if world > 1:
        torch.distributed.barrier()
    elapsed = time.perf_counter() - start
    if rank == 0:
        samples_per_sec = args.steps * batch / elapsed
        print(json.dumps({"framework": "pytorch " + torch.__version__, "processes": world,
                          "autocast": args.autocast, "compiled": args.compile,
                          "model": args.model, "steps": args.steps,
                          "samples_per_sec": samples_per_sec,
                          "tokens_per_sec": samples_per_sec * items if items > 1 else 0,
                          "final_loss": float(loss)}))
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
