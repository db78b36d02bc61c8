#!/usr/bin/python3
"""Convert your own data into Trellis "trellis.samples" HDF5 files (docs/data-formats.md).

    tools/to_samples.py images --src photos/ --out-dir data/photos [--size 64x64] [--mode RGB]
    tools/to_samples.py arrays --src x.npy --labels y.npy --out-dir data/mine
    tools/to_samples.py arrays --src data.npz [--x-key x --y-key y] --out-dir data/mine
    tools/to_samples.py csv --src table.csv [--label-column label] --out-dir data/table

images: one sub-folder per class (JPEG, PNG, ...; classes in name order), every image the same
size or resized to --size, stored as uint8 [N, C, H, W] with scale 1/255. arrays and csv:
float32 [N, ...] samples, labels integers in [0, K) (csv: the label column may hold class
names). A test split is taken out at random (--test-fraction, default 0.1; 0: none) unless
--test-src gives one. mean and std are the training split's, per channel ([N, C, ...]) or per
feature ([N, D]); both splits carry them. Files are written atomically (a .tmp renamed once
complete), in --shards K pieces if asked. Bad input ends with exit code 3, naming the file.
"""

import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trellis_env  # noqa: E402

if __name__ == "__main__":
    trellis_env.reexec()  # before numpy and h5py: the tools' Python, whichever started this

import h5py
import numpy as np

from shard_files import ConversionError, run_conversion, write_samples, write_split

FORMAT, FORMAT_VERSION = "trellis.samples", 1
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


class Progress:
    """A one-line counter on a terminal, a line every 10% otherwise."""

    def __init__(self, what, total):
        self.what, self.total, self.tty = what, max(total, 1), sys.stderr.isatty()
        self.shown = -1

    def update(self, done):
        step = 100 * done // self.total
        if self.tty:
            print(f"\r  {self.what}: {done}/{self.total}", end="", file=sys.stderr, flush=True)
        elif step // 10 != self.shown // 10:
            print(f"  {self.what}: {done}/{self.total}", file=sys.stderr, flush=True)
        self.shown = step

    def close(self):
        if self.tty:
            print(file=sys.stderr)


def read_images(src, size, mode):
    """uint8 images [N, C, H, W], labels, class names, from src/<class>/<image>."""
    from PIL import Image, UnidentifiedImageError  # Debian's python3-pil

    if not os.path.isdir(src):
        raise ConversionError(f"{src}: not a directory (images wants one sub-folder per class)")
    classes = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    if len(classes) < 2:
        raise ConversionError(f"{src}: {len(classes)} class sub-folders, at least 2 needed")
    files = []
    for label, name in enumerate(classes):
        found = sorted(f for f in os.listdir(os.path.join(src, name))
                       if f.lower().endswith(IMAGE_SUFFIXES))
        if not found:
            raise ConversionError(f"{os.path.join(src, name)}: no images ({', '.join(IMAGE_SUFFIXES)})")
        files += [(os.path.join(src, name, f), label) for f in found]
    images, labels, shape = [], [], None
    progress = Progress("images", len(files))
    for i, (path, label) in enumerate(files):
        try:
            with Image.open(path) as img:
                mode = mode or ("L" if img.mode in ("L", "1", "I;16", "I") else "RGB")
                img = img.convert(mode)
                if size:
                    img = img.resize((size[1], size[0]), Image.BILINEAR)
                array = np.asarray(img, dtype=np.uint8)
        except (OSError, UnidentifiedImageError) as e:
            raise ConversionError(f"{path}: not a readable image ({e})")
        array = array[np.newaxis] if array.ndim == 2 else array.transpose(2, 0, 1)
        if shape is None:
            shape = array.shape
        elif array.shape != shape:
            raise ConversionError(f"{path}: {array.shape[2]}x{array.shape[1]} pixels, the first "
                                  f"image has {shape[2]}x{shape[1]}; give --size HxW to resize all")
        images.append(array)
        labels.append(label)
        progress.update(i + 1)
    progress.close()
    return np.stack(images), np.array(labels, dtype=np.int32), classes


def labels_as_classes(raw, what):
    """Integer labels [0, K) as they are; anything else (class names) mapped in sorted order."""
    raw = np.asarray(raw)
    if raw.ndim != 1:
        raise ConversionError(f"{what}: labels must be one per sample, got shape {raw.shape}")
    try:
        as_float = raw.astype(np.float64)
        if np.all(np.isfinite(as_float)) and np.all(as_float == np.round(as_float)):
            ints = as_float.astype(np.int64)
            if ints.min() < 0:
                raise ConversionError(f"{what}: label {ints.min()} is negative")
            return ints.astype(np.int32), None
    except ValueError:
        pass
    names = sorted(set(raw.astype(str).tolist()))
    index = {n: i for i, n in enumerate(names)}
    return np.array([index[v] for v in raw.astype(str).tolist()], dtype=np.int32), names


def read_arrays(src, labels_path, x_key, y_key):
    try:
        if src.endswith(".npz"):
            with np.load(src, allow_pickle=False) as z:
                missing = [k for k in (x_key, y_key) if k not in z.files]
                if missing:
                    raise ConversionError(f"{src}: no array {', '.join(missing)} (it has "
                                          f"{', '.join(z.files)}); give --x-key / --y-key")
                x, y = z[x_key], z[y_key]
        else:
            if not labels_path:
                raise ConversionError(f"{src}: a .npy of samples needs --labels y.npy")
            x, y = np.load(src, allow_pickle=False), np.load(labels_path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ConversionError(f"{src}: cannot read ({e})")
    return check_samples(x, src), y


def read_csv(src, label_column, delimiter):
    try:
        with open(src, newline="") as f:
            rows = [r for r in csv.reader(f, delimiter=delimiter) if r]
    except (OSError, UnicodeDecodeError) as e:
        raise ConversionError(f"{src}: cannot read as text ({e})")
    if not rows:
        raise ConversionError(f"{src}: empty")
    def number(v):
        try:
            float(v)
            return True
        except ValueError:
            return False

    # A header: a first row mostly of names (a data row is mostly numbers, its label aside).
    header = None
    if sum(number(v) for v in rows[0]) * 2 < len(rows[0]):
        header, rows = rows[0], rows[1:]
    width = len(rows[0]) if rows else 0
    if width < 2:
        raise ConversionError(f"{src}: needs a label column and at least one feature column")
    if label_column is None:
        column = width - 1
    elif header and label_column in header:
        column = header.index(label_column)
    elif label_column.lstrip("-").isdigit():
        column = int(label_column) % width
    else:
        raise ConversionError(f"{src}: no label column '{label_column}'"
                              + (f" (columns: {', '.join(header)})" if header else ""))
    features, labels = [], []
    for n, row in enumerate(rows, start=2 if header else 1):
        if len(row) != width:
            raise ConversionError(f"{src}: line {n} has {len(row)} fields, the first has {width}")
        try:
            features.append([float(v) for i, v in enumerate(row) if i != column])
        except ValueError as e:
            raise ConversionError(f"{src}: line {n}: {e}")
        labels.append(row[column])
    return check_samples(np.array(features, dtype=np.float32), src), np.array(labels)


def check_samples(x, what):
    if x.ndim < 2 or x.shape[0] == 0:
        raise ConversionError(f"{what}: samples must be [N, ...] with N > 0, got shape {x.shape}")
    if not np.issubdtype(x.dtype, np.number):
        raise ConversionError(f"{what}: samples of type {x.dtype}, numbers needed")
    x = x.astype(np.float32)
    bad = ~np.isfinite(x)
    if bad.any():
        raise ConversionError(f"{what}: {int(bad.sum())} values are NaN or infinite "
                              f"(the first in sample {int(np.argwhere(bad)[0][0])})")
    return x


def normalisation(x, scale):
    """mean and std per channel (axis 1 of [N, C, ...]) or per feature ([N, D]); a constant
    channel gets std 1 (and a warning) so that the format's std > 0 holds."""
    axes = (0,) + tuple(range(2, x.ndim))
    values = x.astype(np.float64) * scale
    mean = values.mean(axis=axes)
    std = values.std(axis=axes)
    constant = np.flatnonzero(std <= 0)
    if constant.size:
        print(f"warning: {constant.size} channel(s)/feature(s) are constant in the training split "
              f"(the first: {constant[0]}); their std is set to 1", file=sys.stderr)
        std[constant] = 1.0
    return mean.astype(np.float32), std.astype(np.float32)


def split(n, fraction, seed):
    order = np.random.default_rng(seed).permutation(n)
    test = int(round(n * fraction))
    if fraction > 0 and (test == 0 or test == n):
        raise ConversionError(f"{n} samples cannot be split with --test-fraction {fraction}")
    return np.sort(order[test:]), np.sort(order[:test])


def load(args, src, labels_path):
    if args.kind == "images":
        return read_images(src, args.size, args.mode)
    if args.kind == "arrays":
        x, y = read_arrays(src, labels_path, args.x_key, args.y_key)
    else:
        x, y = read_csv(src, args.label_column, args.delimiter)
    y, names = labels_as_classes(y, src)
    if y.shape[0] != x.shape[0]:
        raise ConversionError(f"{src}: {x.shape[0]} samples but {y.shape[0]} labels")
    return x, y, names


def convert(args):
    started = time.perf_counter()
    x, y, names = load(args, args.src, args.labels)
    if args.test_src:
        tx, ty, test_names = load(args, args.test_src, args.test_labels)
        if names != test_names:
            raise ConversionError(f"{args.test_src}: classes {test_names}, the training set's are {names}")
        if tx.shape[1:] != x.shape[1:]:
            raise ConversionError(f"{args.test_src}: samples of shape {tx.shape[1:]}, training {x.shape[1:]}")
        splits = {"train": (x, y), "test": (tx, ty)}
    else:
        train, test = split(x.shape[0], args.test_fraction, args.seed)
        splits = {"train": (x[train], y[train])}
        if test.size:
            splits["test"] = (x[test], y[test])
    num_classes = args.num_classes or int(max(int(v[1].max()) for v in splits.values()) + 1)
    for stem, (_, labels) in splits.items():
        if labels.max() >= num_classes:
            raise ConversionError(f"{stem}: label {int(labels.max())} is not below --num-classes {num_classes}")
    scale = np.float32(1.0 / 255.0) if x.dtype == np.uint8 else np.float32(1.0)
    mean, std = normalisation(splits["train"][0], float(scale))
    os.makedirs(args.out_dir, exist_ok=True)
    for stem, (samples, labels) in splits.items():
        attrs = {"format": FORMAT, "format_version": np.int32(FORMAT_VERSION),
                 "num_classes": np.int32(num_classes), "scale": scale, "mean": mean, "std": std,
                 "source": f"{os.path.basename(os.path.normpath(args.src))} ({stem}); converted "
                           f"by tools/to_samples.py {args.kind}"}
        if names:
            attrs["class_names"] = np.array(names, dtype=h5py.string_dtype())
        write_split(args.out_dir, stem, samples.shape[0], args.shards,
                    lambda path, begin, end: write_samples(path, samples[begin:end],
                                                           labels[begin:end], attrs,
                                                           args.chunk_rows),
                    "samples")
    print(f"{num_classes} classes, samples {list(x.shape[1:])} {x.dtype}; train mean "
          f"{np.round(mean, 4).tolist()[:8]}, std {np.round(std, 4).tolist()[:8]}; "
          f"{time.perf_counter() - started:.2f} s")


def size_arg(text):
    try:
        h, w = (int(v) for v in text.lower().split("x"))
        if h > 0 and w > 0:
            return h, w
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"'{text}': expected HxW, e.g. 64x64")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("kind", choices=["images", "arrays", "csv"])
    parser.add_argument("--src", required=True, help="class folders, .npy/.npz, or .csv")
    parser.add_argument("--out-dir", required=True, help="where train*.h5 and test*.h5 go")
    parser.add_argument("--labels", help="arrays: the labels .npy beside a samples .npy")
    parser.add_argument("--x-key", default="x", help="arrays .npz: the samples' key (x)")
    parser.add_argument("--y-key", default="y", help="arrays .npz: the labels' key (y)")
    parser.add_argument("--label-column", help="csv: name or index (default: the last)")
    parser.add_argument("--delimiter", default=",", help="csv field separator (,)")
    parser.add_argument("--size", type=size_arg, help="images: resize every image to HxW")
    parser.add_argument("--mode", choices=["L", "RGB"], help="images: grayscale or colour "
                        "(default: the first image's)")
    parser.add_argument("--test-src", help="a test set of the same kind, instead of a split")
    parser.add_argument("--test-labels", help="arrays: the test labels .npy")
    parser.add_argument("--test-fraction", type=float, default=0.1,
                        help="share of the data taken out at random as test.h5 (0.1; 0: none)")
    parser.add_argument("--num-classes", type=int, default=0, help="default: largest label + 1")
    parser.add_argument("--shards", type=int, default=1, help="files per split")
    parser.add_argument("--seed", type=int, default=1, help="of the test split")
    parser.add_argument("--chunk-rows", type=int, default=1024, help="rows per HDF5 chunk")
    args = parser.parse_args(argv)
    if not 0 <= args.test_fraction < 1:
        parser.error("--test-fraction must be in [0, 1)")
    if args.shards < 1 or args.shards > 99999 or args.chunk_rows < 1 or args.num_classes < 0:
        parser.error("--shards in [1, 99999], --chunk-rows >= 1 and --num-classes >= 0")
    return run_conversion(convert, args)


if __name__ == "__main__":
    sys.exit(main())
