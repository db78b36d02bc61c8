"""What the dataset converters share (idx_to_hdf5.py, text_to_tokens.py, to_samples.py): shard
file names, atomic writes of a split (one file or shards), the error for bad input and how it
ends a converter.

A split written as K files is <stem>-00000-of-0000K.h5 ... (the naming the C++ reader's
shard globs expect, include/trellis/data/shard_paths.hpp).
"""
import os
import sys


def shard_name(stem, i, k):
    return f"{stem}-{i:05d}-of-{k:05d}.h5"


def stale_outputs(out_dir, stem, keep):
    """Earlier outputs of the same split that a glob like <stem>-*.h5 would also pick up."""
    stale = []
    for name in sorted(os.listdir(out_dir)):
        is_ours = name == f"{stem}.h5" or (name.startswith(f"{stem}-") and name.endswith(".h5")
                                          and "-of-" in name)
        if is_ours and name not in keep:
            stale.append(name)
    return stale


class ConversionError(Exception):
    """Bad input data: the message names the file (and line, sample or image)."""


def run_conversion(convert, args):
    """convert(args); a ConversionError is printed and ends with exit code 3, Trellis' code
    for bad input data."""
    try:
        convert(args)
    except ConversionError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    return 0


def write_atomically(path, fill):
    """Writes the HDF5 file `path` through path.tmp, renamed once fill(file) completes; the .tmp
    is removed when it fails."""
    import h5py
    tmp = path + ".tmp"
    try:
        with h5py.File(tmp, "w") as f:
            fill(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def write_split(out_dir, stem, n, shards, write_part, unit):
    """Rows [0, n) of a split as <stem>.h5, or as K shards, shard i holding rows
    [floor(i n / K), floor((i + 1) n / K)) (as the C++ writers): write_part(path, begin, end)
    for each, then a warning for each earlier output a glob would also pick up."""
    names = [f"{stem}.h5"] if shards == 1 else [shard_name(stem, i, shards) for i in range(shards)]
    for i, name in enumerate(names):
        begin, end = i * n // shards, (i + 1) * n // shards
        path = os.path.join(out_dir, name)
        write_part(path, begin, end)
        print(f"  {path}: {end - begin} {unit}")
    for name in stale_outputs(out_dir, stem, set(names)):
        print(f"warning: {os.path.join(out_dir, name)} is left from an earlier conversion; "
              f"remove it so that globs do not pick it up", file=sys.stderr)


def write_samples(path, samples, labels, attrs, chunk_rows):
    """One trellis.samples file, atomically: /samples and /labels chunked by rows, attrs."""
    rows = max(1, min(chunk_rows, samples.shape[0]))

    def fill(f):
        f.create_dataset("samples", data=samples, chunks=(rows,) + samples.shape[1:])
        f.create_dataset("labels", data=labels, chunks=(rows,))
        for key, value in attrs.items():
            f.attrs[key] = value

    write_atomically(path, fill)
