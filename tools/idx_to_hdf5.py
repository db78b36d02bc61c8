#!/usr/bin/python3
"""Convert MNIST / Fashion-MNIST idx files into Trellis "trellis.samples" HDF5 files.

    /usr/bin/python3 tools/idx_to_hdf5.py --src /usr/share/datasets/fashion-mnist \\
        --out-dir data/fashion-mnist [--shards 4]

writes train.h5 and test.h5 (or train-0000i-of-0000K.h5 and test-0000i-of-0000K.h5), with
/samples uint8 [N, 1, 28, 28], /labels int32 [N] and the root attributes described in
docs/data-formats.md. mean/std come from the TRAIN images and are written into the test
files as well, so both splits are normalised alike. Needs numpy and h5py (Debian:
python3-numpy, python3-h5py); the idx files may be gzipped (*.gz) or plain.
"""

import argparse
import gzip
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trellis_env  # noqa: E402

if __name__ == "__main__":
    trellis_env.reexec()  # before numpy and h5py: the tools' Python, whichever started this

import numpy as np

from shard_files import ConversionError, run_conversion, write_samples, write_split  # noqa: E402

FORMAT = "trellis.samples"
FORMAT_VERSION = 1
IDX_UBYTE = 0x08  # idx element type code for unsigned bytes
SPLITS = {"train": "train", "test": "t10k"}  # output stem -> idx file prefix


def find_idx(src, prefix, kind):
    """Path of e.g. train-images-idx3-ubyte(.gz) in src."""
    ndim = 3 if kind == "images" else 1
    base = os.path.join(src, f"{prefix}-{kind}-idx{ndim}-ubyte")
    for path in (base + ".gz", base):
        if os.path.isfile(path):
            return path
    raise ConversionError(f"{base}.gz: no such file (nor {base})")


def read_idx(path, expected_ndim):
    """Parses an idx file: magic 0x0000 <type> <ndim>, ndim big-endian uint32 sizes, data."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:
        raise ConversionError(f"{path}: cannot read: {e}") from e
    if len(raw) < 4:
        raise ConversionError(f"{path}: too short for an idx header ({len(raw)} bytes)")
    zero, dtype, ndim = int.from_bytes(raw[0:2], "big"), raw[2], raw[3]
    magic = int.from_bytes(raw[0:4], "big")
    expected_magic = (IDX_UBYTE << 8) | expected_ndim
    if zero != 0 or dtype != IDX_UBYTE or ndim != expected_ndim:
        raise ConversionError(f"{path}: bad magic number 0x{magic:08x}, expected "
                              f"0x{expected_magic:08x} (unsigned-byte idx with {expected_ndim} dims)")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ConversionError(f"{path}: header truncated ({len(raw)} bytes)")
    dims = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    expected = header + int(np.prod(dims, dtype=np.int64))
    if len(raw) != expected:
        raise ConversionError(f"{path}: size {len(raw)} bytes does not match dims {dims} "
                              f"(expected {expected} bytes)")
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def load_split(src, prefix, num_classes):
    images_path = find_idx(src, prefix, "images")
    labels_path = find_idx(src, prefix, "labels")
    images = read_idx(images_path, 3)
    labels = read_idx(labels_path, 1)
    if images.shape[0] != labels.shape[0]:
        raise ConversionError(f"{images_path}: {images.shape[0]} images but {labels_path} has "
                              f"{labels.shape[0]} labels")
    if labels.size and int(labels.max()) >= num_classes:
        raise ConversionError(f"{labels_path}: label {int(labels.max())} is outside "
                              f"[0, {num_classes}) (see --num-classes)")
    # [N, H, W] -> [N, 1, H, W]: one channel, the layout the CNN expects.
    return images[:, np.newaxis, :, :], labels.astype(np.int32)


def channel_stats(images, scale):
    """Per-channel mean and (population) std of images * scale, exact via a byte histogram
    (no float copy of the whole set)."""
    means, stds = [], []
    values = np.arange(256, dtype=np.float64) * scale
    for c in range(images.shape[1]):
        counts = np.bincount(images[:, c].reshape(-1), minlength=256).astype(np.float64)
        n = counts.sum()
        mean = float((counts * values).sum() / n)
        var = float((counts * (values - mean) ** 2).sum() / n)
        means.append(mean)
        stds.append(var ** 0.5)
    return np.array(means, dtype=np.float32), np.array(stds, dtype=np.float32)


def convert(args):
    scale = np.float32(1.0 / 255.0)
    started = time.perf_counter()
    data = {stem: load_split(args.src, prefix, args.num_classes) for stem, prefix in SPLITS.items()}
    mean, std = channel_stats(data["train"][0], float(scale))
    if np.any(std <= 0):
        raise ConversionError("the training images are constant: std is 0")
    source = args.source or os.path.basename(os.path.normpath(args.src))

    os.makedirs(args.out_dir, exist_ok=True)
    for stem, (images, labels) in data.items():
        attrs = {
            "format": FORMAT,
            "format_version": np.int32(FORMAT_VERSION),
            "num_classes": np.int32(args.num_classes),
            "scale": scale,
            "mean": mean,
            "std": std,
            "source": f"{source} ({stem}); converted by tools/idx_to_hdf5.py",
        }
        write_split(args.out_dir, stem, images.shape[0], args.shards,
                    lambda path, begin, end: write_samples(path, images[begin:end],
                                                           labels[begin:end], attrs,
                                                           args.chunk_rows),
                    "samples")
    print(f"mean {mean.tolist()}, std {std.tolist()} (train, after scale 1/255); "
          f"{time.perf_counter() - started:.2f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--src", default="/usr/share/datasets/fashion-mnist",
                        help="directory with {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]")
    parser.add_argument("--out-dir", required=True, help="where train*.h5 and test*.h5 go")
    parser.add_argument("--shards", type=int, default=1,
                        help="split each split into K files <stem>-0000i-of-0000K.h5")
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--chunk-rows", type=int, default=1024, help="rows per HDF5 chunk")
    parser.add_argument("--source", default="", help="provenance text (default: src dir name)")
    args = parser.parse_args(argv)
    if args.shards < 1 or args.shards > 99999:
        parser.error("--shards must be in [1, 99999]")
    if args.chunk_rows < 1 or args.num_classes < 1:
        parser.error("--chunk-rows and --num-classes must be positive")
    return run_conversion(convert, args)


if __name__ == "__main__":
    sys.exit(main())
