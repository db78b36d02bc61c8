#!/usr/bin/python3
"""Convert text into Trellis "trellis.tokens" HDF5 files of byte-level tokens.

    /usr/bin/python3 tools/text_to_tokens.py --src corpus.txt [--src more.txt.gz] \\
        --out-dir data/austen [--val-fraction 0.1] [--shards K]

writes train.h5 and val.h5 (or train-0000i-of-0000K.h5 and val-0000i-of-0000K.h5): /tokens
uint16 [N] holding the bytes of the UTF-8 text (tokenizer "bytes", vocab_size 256), chunked,
and the root attributes described in docs/data-formats.md. The sources are concatenated in
the order given; the LAST val-fraction of the bytes becomes the validation split, so the two
splits never overlap. Each --src may be plain text, gzip (*.gz), or an R lazy-load database
(*.rdb, e.g. the Jane Austen novels of Debian's r-cran-janeaustenr), whose character
vectors are extracted as lines. Needs numpy and h5py (Debian: python3-numpy, python3-h5py).
"""

import argparse
import bz2
import glob
import gzip
import lzma
import os
import sys
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trellis_env  # noqa: E402

if __name__ == "__main__":
    trellis_env.reexec()  # before numpy and h5py: the tools' Python, whichever started this

import numpy as np

from shard_files import ConversionError, run_conversion, write_atomically, write_split  # noqa: E402

FORMAT = "trellis.tokens"
FORMAT_VERSION = 1
VOCAB_SIZE = 256  # tokenizer "bytes": token = byte value
SPLITS = ("train", "val")


# ---- reading sources ---------------------------------------------------------------------

class XdrReader:
    """Big-endian reader over R's XDR serialization ("X\\n" format)."""

    def __init__(self, blob, where):
        self.blob, self.pos, self.where = blob, 0, where

    def take(self, n):
        if self.pos + n > len(self.blob):
            raise ConversionError(f"{self.where}: R object truncated at byte {self.pos}")
        part = self.blob[self.pos:self.pos + n]
        self.pos += n
        return part

    def int(self):
        return int.from_bytes(self.take(4), "big", signed=True)


R_STRSXP, R_CHARSXP = 16, 9
R_LATIN1 = 1 << 2  # CHARSXP encoding bits, in the "levels" above the 12 flag bits


def r_character_lines(blob, where):
    """The elements of a serialized R character vector as UTF-8 byte strings (NA -> b""),
    or None when the object is something else."""
    r = XdrReader(blob, where)
    if r.take(2) != b"X\n":
        raise ConversionError(f"{where}: not an R object in XDR serialization")
    version = r.int()
    r.int(), r.int()  # writer's and minimal reader's R versions
    if version == 3:
        r.take(r.int())  # the writer's native encoding
    elif version != 2:
        raise ConversionError(f"{where}: R serialization version {version}, expected 2 or 3")
    if r.int() & 0xFF != R_STRSXP:
        return None
    length = r.int()
    if length == -1:  # long vector: two more words
        length = (r.int() << 32) + r.int()
    lines = []
    for _ in range(length):
        flags = r.int()
        if flags & 0xFF != R_CHARSXP:
            raise ConversionError(f"{where}: element of type {flags & 0xFF} in a character vector")
        n = r.int()
        raw = b"" if n == -1 else r.take(n)
        lines.append(raw.decode("latin-1").encode() if (flags >> 12) & R_LATIN1 else raw)
    return lines


def rdb_objects(data, path):
    """Decompressed objects of an R lazy-load database, in file order. Each is a big-endian
    uint32 length followed by zlib data (R's compression type 1), or by a type byte and
    zlib ('Z'), bzip2 ('2'), xz ('X') or stored ('0') data (types 2 and 3)."""
    pos = 0
    while pos < len(data):
        if pos + 5 > len(data):
            raise ConversionError(f"{path}: truncated R lazy-load database at byte {pos}")
        length = int.from_bytes(data[pos:pos + 4], "big")
        kind, body = data[pos + 4:pos + 5], pos + 5
        if kind == b"\x78":  # a zlib header: type 1, no type byte
            kind, body = b"Z", pos + 4
        if kind == b"0":
            blob, rest = data[body:body + length], data[body + length:]
        else:
            makers = {b"Z": zlib.decompressobj, b"2": bz2.BZ2Decompressor,
                      b"X": lzma.LZMADecompressor}
            if kind not in makers:
                raise ConversionError(f"{path}: not an R lazy-load database (byte {pos + 4} "
                                      f"is {kind!r}, expected a compression type)")
            decompressor = makers[kind]()
            try:
                blob = decompressor.decompress(data[body:])
            except (zlib.error, OSError, lzma.LZMAError) as e:
                raise ConversionError(f"{path}: object at byte {pos} does not decompress: {e}")
            if not decompressor.eof:
                raise ConversionError(f"{path}: object at byte {pos} is truncated")
            rest = decompressor.unused_data
        if len(blob) != length:
            raise ConversionError(f"{path}: object at byte {pos} has {len(blob)} bytes, "
                                  f"its header says {length}")
        yield pos, blob
        pos = len(data) - len(rest)


def read_rdb_text(path):
    """Every character vector of an R lazy-load database, one element per line."""
    with open(path, "rb") as f:
        data = f.read()
    text = []
    for pos, blob in rdb_objects(data, path):
        lines = r_character_lines(blob, f"{path} (object at byte {pos})")
        if lines is not None:
            text.append(b"\n".join(lines) + b"\n")
    if not text:
        raise ConversionError(f"{path}: the R database holds no character vectors")
    return b"".join(text)


def read_source(path):
    """The bytes of one source: plain text, gzip, or an R lazy-load database."""
    if not os.path.isfile(path):
        raise ConversionError(f"{path}: no such file")
    try:
        if path.endswith(".rdb"):
            data = read_rdb_text(path)
        else:
            with (gzip.open if path.endswith(".gz") else open)(path, "rb") as f:
                data = f.read()
    except (OSError, EOFError, zlib.error) as e:
        raise ConversionError(f"{path}: cannot read: {e}") from e
    if not data:
        raise ConversionError(f"{path}: no text (the file is empty)")
    return data


def expand_sources(specs):
    """Files in order: a file as given, a directory's files (recursively, by name), a glob's
    matches (by name); ConversionError when a directory or glob gives nothing."""
    paths = []
    for spec in specs:
        if os.path.isdir(spec):
            found = sorted(os.path.join(root, f) for root, _, files in os.walk(spec) for f in files)
            if not found:
                raise ConversionError(f"{spec}: an empty directory")
            paths += found
        elif any(c in spec for c in "*?[") and not os.path.exists(spec):
            found = sorted(p for p in glob.glob(spec, recursive=True) if os.path.isfile(p))
            if not found:
                raise ConversionError(f"{spec}: no file matches")
            paths += found
        else:
            paths.append(spec)
    return paths


def require_text(data, path):
    """Byte-level tokens take any bytes, but a NUL byte or bytes that are not UTF-8 mean the
    file is most likely not text (an image, an archive, a model): refused unless --binary."""
    if b"\x00" in data:
        raise ConversionError(f"{path}: holds NUL bytes, not text (give --binary to take it as bytes)")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConversionError(f"{path}: not UTF-8 text at byte {e.start} (give --binary to take "
                              f"it as bytes)")


def default_source(paths):
    """Provenance for the attribute: file names, or the R package name of an .rdb."""
    names = []
    for path in paths:
        parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
        if path.endswith(".rdb") and len(parts) >= 3 and parts[-2] == "data":
            names.append(parts[-3])  # .../<package>/data/Rdata.rdb
        else:
            names.append(os.path.basename(path))
    return ", ".join(names)


# ---- writing -----------------------------------------------------------------------------

def write_file(path, tokens, attrs, chunk_tokens):
    """One trellis.tokens file, atomically."""
    def fill(f):
        f.create_dataset("tokens", data=tokens, dtype=np.uint16,
                         chunks=(max(1, min(chunk_tokens, tokens.size)),))
        for key, value in attrs.items():
            f.attrs[key] = value

    write_atomically(path, fill)


def split_bounds(n, val_fraction):
    """(train, val) byte counts: the last floor(n * val_fraction) bytes are validation."""
    n_val = int(n * val_fraction)
    if n_val == 0 and val_fraction > 0:
        raise ConversionError(f"the text has {n} bytes: too few for a validation split of "
                              f"{val_fraction} (need at least {int(np.ceil(1 / val_fraction))})")
    if n - n_val < 2:
        raise ConversionError(f"the text has {n} bytes: too few to train on")
    return n - n_val, n_val


def convert(args):
    started = time.perf_counter()
    paths = expand_sources(args.src)
    sources = []
    for path in paths:
        data = read_source(path)
        if not args.binary and not path.endswith(".rdb"):
            require_text(data, path)
        sources.append(data)
    text = b"".join(sources)
    n_train, n_val = split_bounds(len(text), args.val_fraction)
    # A model sees windows of model.seq_len + 1 tokens (128 in inputs/gpt_char.ini).
    window = 129
    for split, n, least in (("train", n_train, 100), ("val", n_val, 10)):
        if 0 < n < least * window:
            print(f"warning: the {split} split has {n} tokens, fewer than {least} windows of "
                  f"{window} (model.seq_len 128 + 1): too small to {'train' if split == 'train' else 'validate'} "
                  f"on reliably", file=sys.stderr)
    tokens = np.frombuffer(text, dtype=np.uint8)
    source = args.source or default_source(paths)

    os.makedirs(args.out_dir, exist_ok=True)
    parts = {"train": tokens[:n_train], "val": tokens[n_train:]}
    for split in SPLITS:
        if split == "val" and n_val == 0:
            continue
        stream = parts[split]
        attrs = {
            "format": FORMAT,
            "format_version": np.int32(FORMAT_VERSION),
            "vocab_size": np.int32(VOCAB_SIZE),
            "tokenizer": "bytes",
            "split": split,
            "source": f"{source} ({split}); converted by tools/text_to_tokens.py",
        }
        write_split(args.out_dir, split, stream.size, args.shards,
                    lambda path, begin, end: write_file(path, stream[begin:end], attrs,
                                                        args.chunk_tokens),
                    "tokens")
    print(f"{len(text)} bytes -> {n_train} train + {n_val} val tokens (vocab {VOCAB_SIZE}, "
          f"bytes); {time.perf_counter() - started:.2f} s")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", action="store_true",
                        help="take files that do not look like text (NUL bytes, not UTF-8) as bytes")
    parser.add_argument("--src", action="append", required=True,
                        help="a text file (plain, .gz, or R lazy-load .rdb), a directory (its files, by name) or a glob; repeat to concatenate")
    parser.add_argument("--out-dir", required=True, help="where train*.h5 and val*.h5 go")
    parser.add_argument("--val-fraction", type=float, default=0.1,
                        help="the last fraction of the bytes that becomes val.h5 (0: none)")
    parser.add_argument("--shards", type=int, default=1,
                        help="split each split into K files <split>-0000i-of-0000K.h5")
    parser.add_argument("--chunk-tokens", type=int, default=65536, help="tokens per HDF5 chunk")
    parser.add_argument("--source", default="", help="provenance text (default: source names)")
    args = parser.parse_args(argv)
    if not 0 <= args.val_fraction < 1:
        parser.error("--val-fraction must be in [0, 1)")
    if args.shards < 1 or args.shards > 99999:
        parser.error("--shards must be in [1, 99999]")
    if args.chunk_tokens < 1:
        parser.error("--chunk-tokens must be positive")
    return run_conversion(convert, args)


if __name__ == "__main__":
    sys.exit(main())
