"""Shard file names shared by the dataset converters (idx_to_hdf5.py, text_to_tokens.py).

A split written as K files is <stem>-00000-of-0000K.h5 ... (the naming the C++ reader's
shard globs expect, include/trellis/data/shard_paths.hpp).
"""
import os


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
