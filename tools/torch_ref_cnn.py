#!/usr/bin/python3
"""PyTorch reference values for Trellis's CNN layers and Cnn model (tests/unit/test_cnn_reference.cpp).

    /usr/bin/python3 tools/torch_ref_cnn.py [--out tests/reference/cnn_reference.h5]

Builds each case in PyTorch with the same parameter names and layouts as Trellis (Conv2d weight
[out, in, k, k], BatchNorm weight/bias [C], Linear weight [out, in]; images NCHW, one image per
row), gives it fixed random parameters (float32 values, so Trellis loads them exactly), runs
forward and backward in float64 on float32 inputs and writes, per case group:

    /<case>/x            [n, C*H*W] float32   input, one flattened NCHW image per row
    /<case>/dy           [n, out]   float32   upstream gradient: loss = sum(dy * y)
    /<case>/y            [n, out]   float64   output
    /<case>/dx           [n, C*H*W] float64   input gradient
    /<case>/params/<name>    float32  every parameter, by its Trellis name
    /<case>/grads/<name>     float64  its gradient
    /<case>/buffers_in/<name>   float32  BatchNorm running stats before the forward
    /<case>/buffers/<name>      float64  ... and after it (training mode, momentum 0.1)
    attributes: the case's geometry (n, channels, height, width, out_channels, kernel, stride,
    padding, ...)

Cases: conv (3 -> 4, k3, stride 2, pad 1, bias, 7x7), conv_s1p0 (k3, stride 1, no padding),
maxpool (k2 s2 on integer-valued inputs: ties, PyTorch picks the first maximum; also writes
/maxpool/argmax, plane index h*W + w), maxpool_overlap (k3 s2), batchnorm (training mode, plus
/batchnorm/eval_x, eval_y, eval_dy, eval_dx: an eval-mode pass with the updated running stats),
block_identity and block_projection (BasicBlock, training mode), cnn (the whole Cnn, widths
{4, 8}, 1 block per stage, 8x8x3 input, 5 classes, training mode: y are the logits).
Needs torch, numpy, h5py (Debian's python3-torch, python3-numpy, python3-h5py).
"""
import argparse
import os

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 20240612
LIBVER = ("v108", "v108")  # compact object headers, still readable by HDF5 >= 1.8


class ConvBn(nn.Module):
    """The projection shortcut: 1x1 conv (no bias) + BatchNorm, named conv / bn as in Trellis."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 1, stride, 0, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class BasicBlock(nn.Module):
    """ResNet BasicBlock with Trellis's parameter names (nn/residual.hpp)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = ConvBn(cin, cout, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        sc = x if self.shortcut is None else self.shortcut(x)
        return F.relu(out + sc)


class Stem(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Stage(nn.Module):
    def __init__(self, cin, cout, blocks, stride):
        super().__init__()
        for b in range(blocks):
            self.add_module(f"block{b + 1}", BasicBlock(cin if b == 0 else cout, cout,
                                                        stride if b == 0 else 1))

    def forward(self, x):
        for block in self.children():
            x = block(x)
        return x


class Cnn(nn.Module):
    """nn/cnn.hpp: stem, stages (stride 2 from the second on), global average pool, head."""

    def __init__(self, channels, classes, widths, blocks):
        super().__init__()
        self.stem = Stem(channels, widths[0])
        cin = widths[0]
        for s, w in enumerate(widths):
            self.add_module(f"stage{s + 1}", Stage(cin, w, blocks, 1 if s == 0 else 2))
            cin = w
        self.head = nn.Linear(cin, classes)
        self.num_stages = len(widths)

    def forward(self, x):
        x = self.stem(x)
        for s in range(self.num_stages):
            x = getattr(self, f"stage{s + 1}")(x)
        return self.head(x.mean(dim=(2, 3)))


def f32(t):
    return t.detach().to(torch.float32).cpu().numpy()


def f64(t):
    return t.detach().to(torch.float64).cpu().numpy()


def randomize(module, gen):
    """Float32-exact random parameters (BatchNorm gamma in [0.5, 1.5], beta in [-0.5, 0.5]) and
    running stats, so the reference does not depend on PyTorch's init and exercises gamma != 1."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if isinstance(_owner(module, name), nn.BatchNorm2d):
                lo, hi = (0.5, 1.5) if name.endswith("weight") else (-0.5, 0.5)
                v = lo + (hi - lo) * torch.rand(p.shape, generator=gen, dtype=torch.float32)
            else:
                fan_in = p[0].numel() if p.dim() > 1 else _owner(module, name).weight[0].numel()
                b = 1.0 / np.sqrt(fan_in)
                v = (torch.rand(p.shape, generator=gen, dtype=torch.float32) * 2 - 1) * b
            p.copy_(v.to(p.dtype))
        for name, buf in module.named_buffers():
            if name.endswith("running_mean"):
                buf.copy_((torch.rand(buf.shape, generator=gen) - 0.5).to(buf.dtype))
            elif name.endswith("running_var"):
                buf.copy_((0.5 + torch.rand(buf.shape, generator=gen)).to(buf.dtype))


def _owner(module, param_name):
    owner = module
    for part in param_name.split(".")[:-1]:
        owner = getattr(owner, part)
    return owner


def named_stats(module):
    return [(n, b) for n, b in module.named_buffers() if not n.endswith("num_batches_tracked")]


def run_case(h5, case, module, x_shape, gen, attrs, integer_inputs=False, training=True):
    """Runs loss = sum(dy * module(x)) in float64 and writes the case group."""
    g = h5.create_group(case)
    for k, v in attrs.items():
        g.attrs[k] = v
    if integer_inputs:
        x32 = torch.randint(-2, 3, x_shape, generator=gen).to(torch.float32)
    else:
        x32 = torch.randn(x_shape, generator=gen, dtype=torch.float32)
    params = {n: f32(p) for n, p in module.named_parameters()}
    for n, v in params.items():
        g.create_dataset(f"params/{n}", data=v)
    for n, b in named_stats(module):
        g.create_dataset(f"buffers_in/{n}", data=f32(b))

    module = module.double()
    module.train(training)
    x = x32.double().requires_grad_(True)
    y = module(x)
    dy32 = torch.randn(y.shape, generator=gen, dtype=torch.float32)
    (y * dy32.double()).sum().backward()

    n = x_shape[0]
    g.create_dataset("x", data=f32(x32).reshape(n, -1))
    g.create_dataset("dy", data=f32(dy32).reshape(n, -1))
    g.create_dataset("y", data=f64(y).reshape(n, -1))
    g.create_dataset("dx", data=f64(x.grad).reshape(n, -1))
    for name, p in module.named_parameters():
        g.create_dataset(f"grads/{name}", data=f64(p.grad))
    for name, b in named_stats(module):
        g.create_dataset(f"buffers/{name}", data=f64(b))
    return g, module


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "reference",
                                                      "cnn_reference.h5"))
    args = parser.parse_args()
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    torch.backends.mkldnn.enabled = False  # plain reference kernels

    with h5py.File(args.out, "w", libver=LIBVER) as h5:
        h5.attrs["generator"] = "tools/torch_ref_cnn.py"
        h5.attrs["torch_version"] = str(torch.__version__)
        h5.attrs["seed"] = SEED

        for case, (cin, cout, k, s, p, hw, n) in {
            "conv": (3, 4, 3, 2, 1, (7, 7), 2),
            "conv_s1p0": (2, 3, 3, 1, 0, (6, 5), 3),
        }.items():
            conv = nn.Conv2d(cin, cout, k, s, p, bias=True)
            m = nn.Sequential()
            m.add_module("conv", conv)
            randomize(m, gen)
            run_case(h5, case, m, (n, cin, *hw), gen,
                     dict(n=n, channels=cin, height=hw[0], width=hw[1], out_channels=cout,
                          kernel=k, stride=s, padding=p, bias=1))

        for case, (c, hw, k, s, n, ints) in {
            "maxpool": (3, (6, 6), 2, 2, 2, True),
            "maxpool_overlap": (2, (7, 6), 3, 2, 2, False),
        }.items():
            pool = nn.MaxPool2d(k, s)
            g, _ = run_case(h5, case, pool, (n, c, *hw), gen,
                            dict(n=n, channels=c, height=hw[0], width=hw[1], kernel=k, stride=s),
                            integer_inputs=ints)
            x = torch.from_numpy(g["x"][...]).reshape(n, c, *hw)
            _, idx = F.max_pool2d(x, k, s, return_indices=True)
            g.create_dataset("argmax", data=idx.reshape(n, -1).numpy().astype(np.int32))

        # BatchNorm2d, training mode, then an eval-mode pass with the updated running stats.
        c, hw, n = 3, (5, 4), 4
        bn = nn.Sequential()
        bn.add_module("bn", nn.BatchNorm2d(c, eps=1e-5, momentum=0.1))
        randomize(bn, gen)
        g, bn64 = run_case(h5, "batchnorm", bn, (n, c, *hw), gen,
                           dict(n=n, channels=c, height=hw[0], width=hw[1]))
        bn64.eval()
        xe32 = torch.randn((3, c, *hw), generator=gen, dtype=torch.float32)
        xe = xe32.double().requires_grad_(True)
        ye = bn64(xe)
        dye32 = torch.randn(ye.shape, generator=gen, dtype=torch.float32)
        (ye * dye32.double()).sum().backward()
        g.create_dataset("eval_x", data=f32(xe32).reshape(3, -1))
        g.create_dataset("eval_dy", data=f32(dye32).reshape(3, -1))
        g.create_dataset("eval_y", data=f64(ye).reshape(3, -1))
        g.create_dataset("eval_dx", data=f64(xe.grad).reshape(3, -1))

        for case, (cin, cout, s, hw, n) in {
            "block_identity": (4, 4, 1, (6, 6), 3),
            "block_projection": (3, 6, 2, (7, 7), 3),
        }.items():
            block = BasicBlock(cin, cout, s)
            randomize(block, gen)
            run_case(h5, case, block, (n, cin, *hw), gen,
                     dict(n=n, channels=cin, height=hw[0], width=hw[1], out_channels=cout,
                          stride=s))

        widths, classes = [4, 8], 5
        cnn = Cnn(3, classes, widths, 1)
        randomize(cnn, gen)
        run_case(h5, "cnn", cnn, (4, 3, 8, 8), gen,
                 dict(n=4, channels=3, height=8, width=8, classes=classes,
                      widths=np.array(widths, dtype=np.int32), blocks=1))
    print(f"wrote {os.path.normpath(args.out)} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
