#!/usr/bin/python3
"""PyTorch reference values for Trellis's transformer layers and GPT (tests/unit/test_gpt_reference.cpp).

    /usr/bin/python3 tools/torch_ref_gpt.py [--out tests/reference/gpt_reference.h5]

Builds nanoGPT-style modules inline (same parameter names and layouts as Trellis: Linear
weights [out, in], embeddings [rows, d], heads split as q.view(B, T, nh, hd).transpose(1, 2)),
gives them fixed random parameters (float32 values, so Trellis can load them exactly), runs
forward and backward in float64 and writes, per case:

    /<case>/params/<name>   float32   every parameter, by its Trellis name
    /<case>/grads/<name>    float64   its gradient
    layernorm, attention, block:  x [rows, d] float32, dy [rows, d] float32 (the upstream
        gradient: loss = sum(dy * y)), y [rows, d] float64, dx [rows, d] float64
    gpt:  tokens, targets [n * T] int32, logits [n * T, vocab] float64, loss float64 (the
        mean cross-entropy over all n * T rows, whose gradients are stored)
    attributes on each case group: the shapes (rows, d, n_head, seq_len, n_layer, vocab, n).

The file is byte-for-byte reproducible (no object times, HDF5 1.8 format). Dropout is 0
(PyTorch's masks are not Trellis's counter-based ones). GELU is the exact erf form
(nn.GELU() default), as in Trellis. Needs torch, numpy, h5py (Debian's python3-torch,
python3-numpy, python3-h5py).
"""
import argparse
import math
import os

import h5py
import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

SEED = 20240611


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention, written out (no flash path) so every step is explicit."""

    def __init__(self, d, n_head, seq_len):
        super().__init__()
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.n_head = n_head
        self.register_buffer("mask", torch.tril(torch.ones(seq_len, seq_len)).view(1, 1, seq_len, seq_len))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hd = C // self.n_head
        q = q.view(B, T, self.n_head, hd).transpose(1, 2)
        k = k.view(B, T, self.n_head, hd).transpose(1, 2)
        v = v.view(B, T, self.n_head, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()  # exact erf GELU
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, d, n_head, seq_len):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = CausalSelfAttention(d, n_head, seq_len)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """nanoGPT's GPT without the 'transformer.' prefix; lm_head tied to wte (no bias)."""

    def __init__(self, vocab, seq_len, d, n_head, n_layer):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq_len, d)
        self.h = nn.ModuleList([Block(d, n_head, seq_len) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, idx):
        B, T = idx.size()
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        return x @ self.wte.weight.t()


def set_parameters(module, rng, prefix=""):
    """Fixed float32 parameters, big enough that every term matters (not GPT-2's tiny init)."""
    params = {}
    for name, p in module.named_parameters():
        full = prefix + name
        shape = tuple(p.shape)
        if name.endswith("bias"):
            v = 0.1 * rng.standard_normal(shape)
        elif p.dim() == 1:  # LayerNorm weight
            v = 1.0 + 0.2 * rng.standard_normal(shape)
        elif name.endswith("wte.weight") or name.endswith("wpe.weight"):
            v = 0.5 * rng.standard_normal(shape)
        else:  # Linear weight [out, in]
            v = rng.standard_normal(shape) / math.sqrt(shape[1])
        v = v.astype(np.float32)
        with torch.no_grad():
            p.copy_(torch.from_numpy(v.astype(np.float64)))
        params[full] = v
    return params


def create_group(parent, name):
    """A group without modification times, so regenerating the file gives the same bytes."""
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    return h5py.Group(h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl))


def write_case(f, case, params, module, prefix, attrs, arrays):
    g = create_group(f, case)
    for k, v in attrs.items():
        g.attrs[k] = v
    for k, v in arrays.items():
        g.create_dataset(k, data=v, track_times=False)
    gp = create_group(g, "params")
    gg = create_group(g, "grads")
    for name, p in module.named_parameters():
        gp.create_dataset(prefix + name, data=params[prefix + name], track_times=False)
        gg.create_dataset(prefix + name, data=p.grad.detach().numpy().astype(np.float64), track_times=False)


def layer_case(f, case, module, prefix, rows, d, rng, attrs, seq_len=None):
    params = set_parameters(module, rng, prefix)
    x32 = rng.uniform(-2.0, 2.0, (rows, d)).astype(np.float32)
    dy32 = rng.uniform(-1.0, 1.0, (rows, d)).astype(np.float32)
    x = torch.from_numpy(x32.astype(np.float64)).requires_grad_(True)
    xin = x if seq_len is None else x.view(rows // seq_len, seq_len, d)
    y = module(xin).reshape(rows, d)
    (y * torch.from_numpy(dy32.astype(np.float64))).sum().backward()
    write_case(f, case, params, module, prefix, attrs,
               {"x": x32, "dy": dy32, "y": y.detach().numpy(), "dx": x.grad.numpy()})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "reference", "gpt_reference.h5"))
    args = ap.parse_args()

    torch.manual_seed(SEED)
    torch.set_default_dtype(torch.float64)
    rng = np.random.default_rng(SEED)
    d, n_head, T = 8, 2, 5

    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)  # root group without times: reproducible bytes
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_V18, h5py.h5f.LIBVER_V18)  # readable by HDF5 >= 1.8
    fid = h5py.h5f.create(args.out.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
    with h5py.File(fid) as f:
        f.attrs["generator"] = "tools/torch_ref_gpt.py, torch " + torch.__version__

        ln = nn.LayerNorm(d)  # eps 1e-5
        layer_case(f, "layernorm", ln, "ln.", 6, d, rng, {"rows": 6, "d": d})

        attn = CausalSelfAttention(d, n_head, T)
        layer_case(f, "attention", attn, "attn.", 2 * T, d, rng,
                   {"rows": 2 * T, "d": d, "n_head": n_head, "seq_len": T}, seq_len=T)

        block = Block(d, n_head, T)
        layer_case(f, "block", block, "blk.", 2 * T, d, rng,
                   {"rows": 2 * T, "d": d, "n_head": n_head, "seq_len": T}, seq_len=T)

        vocab, n_layer, n = 11, 2, 3
        gpt = GPT(vocab, T, d, n_head, n_layer)
        params = set_parameters(gpt, rng)
        tokens = rng.integers(0, vocab, (n, T)).astype(np.int32)
        targets = rng.integers(0, vocab, (n, T)).astype(np.int32)
        logits = gpt(torch.from_numpy(tokens.astype(np.int64)))
        loss = F.cross_entropy(logits.reshape(n * T, vocab),
                               torch.from_numpy(targets.astype(np.int64)).reshape(-1))
        loss.backward()
        write_case(f, "gpt", params, gpt, "",
                   {"n": n, "seq_len": T, "d": d, "n_head": n_head, "n_layer": n_layer, "vocab": vocab},
                   {"tokens": tokens.reshape(-1), "targets": targets.reshape(-1),
                    "logits": logits.detach().numpy().reshape(n * T, vocab),
                    "loss": np.float64(loss.item())})
    print(f"wrote {os.path.normpath(args.out)} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
