#!/usr/bin/python3
"""Tests of tools/text_to_tokens.py on tiny synthetic texts and R databases.

    /usr/bin/python3 tests/tools/test_text_to_tokens.py
"""

import bz2
import contextlib
import glob
import io
import gzip
import lzma
import os
import sys
import tempfile
import unittest
import zlib

import h5py
import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import text_to_tokens  # noqa: E402

TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife.\nCafé, naïve — UTF-8 stays bytes.\n").encode() * 7


def xdr_int(value):
    return value.to_bytes(4, "big", signed=True)


def r_serialize(lines, latin1=()):
    """A serialized R character vector (XDR, version 3); None elements are NA."""
    out = b"X\n" + xdr_int(3) + xdr_int(0x040201) + xdr_int(0x030500) + xdr_int(5) + b"UTF-8"
    out += xdr_int(16) + xdr_int(len(lines))
    for i, line in enumerate(lines):
        if line is None:
            out += xdr_int(9) + xdr_int(-1)
        elif i in latin1:
            raw = line.encode("latin-1")
            out += xdr_int(9 | (4 << 12)) + xdr_int(len(raw)) + raw
        else:
            raw = line.encode()
            out += xdr_int(9 | (8 << 12)) + xdr_int(len(raw)) + raw
    return out


def r_integers(values):
    return (b"X\n" + xdr_int(3) + xdr_int(0x040201) + xdr_int(0x030500) + xdr_int(5) + b"UTF-8"
            + xdr_int(13) + xdr_int(len(values)) + b"".join(xdr_int(v) for v in values))


def rdb_entry(blob, kind="1"):
    """One lazy-load database entry with R's compression type 1 (zlib) or 3 ('2', 'X')."""
    head = len(blob).to_bytes(4, "big")
    if kind == "1":
        return head + zlib.compress(blob)
    return head + kind.encode() + (bz2.compress(blob) if kind == "2" else lzma.compress(blob))


class ConverterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data, gz=False):
        path = os.path.join(self.dir, name)
        with (gzip.open if gz else open)(path, "wb") as f:
            f.write(data)
        return path

    def run_tool(self, *args):
        """Exit code of the tool; its messages go to self.stdout / self.stderr."""
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = text_to_tokens.main(["--out-dir", self.out, "--chunk-tokens", "16", *args])
        self.stdout, self.stderr = out.getvalue(), err.getvalue()
        return code

    def tokens(self, pattern):
        """The concatenated /tokens of the files matching pattern (sorted), and their attrs."""
        parts, attrs = [], None
        for path in sorted(glob.glob(os.path.join(self.out, pattern))):
            with h5py.File(path, "r") as f:
                self.assertEqual(f["tokens"].dtype, np.uint16)
                self.assertEqual(f["tokens"].ndim, 1)
                parts.append(f["tokens"][:])
                attrs = dict(f.attrs)
        return np.concatenate(parts), attrs

    def test_train_and_val_are_the_text_split_at_the_end(self):
        src = self.write("a.txt", TEXT)
        self.assertEqual(self.run_tool("--src", src), 0)
        train, attrs = self.tokens("train.h5")
        val, val_attrs = self.tokens("val.h5")
        n_val = len(TEXT) // 10
        self.assertEqual(val.size, n_val)
        self.assertEqual(bytes(train.astype(np.uint8)), TEXT[:len(TEXT) - n_val])
        self.assertEqual(bytes(val.astype(np.uint8)), TEXT[len(TEXT) - n_val:])  # the LAST bytes
        for a, split in ((attrs, "train"), (val_attrs, "val")):
            self.assertEqual(a["format"], "trellis.tokens")
            self.assertEqual(int(a["format_version"]), 1)
            self.assertEqual(int(a["vocab_size"]), 256)
            self.assertEqual(a["tokenizer"], "bytes")
            self.assertEqual(a["split"], split)
            self.assertIn("a.txt", a["source"])
        with h5py.File(os.path.join(self.out, "train.h5"), "r") as f:
            self.assertEqual(f["tokens"].chunks, (16,))
        self.assertEqual([n for n in os.listdir(self.out) if n.endswith(".tmp")], [])

    def test_sources_concatenate_in_order_and_gzip_is_read(self):
        first = self.write("one.txt", TEXT[:100])
        second = self.write("two.txt.gz", TEXT[100:], gz=True)
        self.assertEqual(self.run_tool("--src", first, "--src", second, "--val-fraction", "0.25"), 0)
        train, _ = self.tokens("train.h5")
        val, _ = self.tokens("val.h5")
        self.assertEqual(bytes(np.concatenate([train, val]).astype(np.uint8)), TEXT)

    def test_shards_split_each_stream_like_the_cpp_writer(self):
        src = self.write("a.txt", TEXT)
        self.assertEqual(self.run_tool("--src", src, "--shards", "3", "--val-fraction", "0"), 0)
        names = sorted(os.listdir(self.out))
        self.assertEqual(names, [f"train-0000{i}-of-00003.h5" for i in range(3)])
        n = len(TEXT)
        sizes = []
        for name in names:
            with h5py.File(os.path.join(self.out, name), "r") as f:
                sizes.append(f["tokens"].size)
        self.assertEqual(sizes, [(i + 1) * n // 3 - i * n // 3 for i in range(3)])
        train, _ = self.tokens("train-*.h5")
        self.assertEqual(bytes(train.astype(np.uint8)), TEXT)

    def test_more_shards_than_tokens_gives_empty_shards(self):
        src = self.write("a.txt", b"abcdefghij")
        self.assertEqual(self.run_tool("--src", src, "--shards", "4", "--val-fraction", "0.5"), 0)
        val, _ = self.tokens("val-*.h5")
        self.assertEqual(bytes(val.astype(np.uint8)), b"fghij")

    def test_r_lazy_load_database_character_vectors_become_lines(self):
        novel = ["EMMA", "", "Emma Woodhouse, handsome, clever,", None, "Caf\u00e9 au lait"]
        other = ["PERSUASION", "Sir Walter Elliot"]
        rdb = (rdb_entry(r_serialize(novel, latin1={4})) + rdb_entry(r_integers([1, 2, 3]))
               + rdb_entry(r_serialize(other), "2") + rdb_entry(r_serialize(["THE END"]), "X"))
        pkg = os.path.join(self.dir, "janeaustenr", "data")
        os.makedirs(pkg)
        path = os.path.join(pkg, "Rdata.rdb")
        with open(path, "wb") as f:
            f.write(rdb)
        expected = ("EMMA\n\nEmma Woodhouse, handsome, clever,\n\nCaf\u00e9 au lait\n"
                    "PERSUASION\nSir Walter Elliot\nTHE END\n").encode()
        self.assertEqual(text_to_tokens.read_source(path), expected)
        self.assertEqual(self.run_tool("--src", path, "--val-fraction", "0.1"), 0)
        train, attrs = self.tokens("train.h5")
        val, _ = self.tokens("val.h5")
        self.assertEqual(bytes(np.concatenate([train, val]).astype(np.uint8)), expected)
        self.assertTrue(attrs["source"].startswith("janeaustenr (train)"))

    def test_bad_inputs_fail_with_exit_code_3_and_write_nothing(self):
        good = self.write("good.txt", TEXT)
        cases = {
            "missing": [os.path.join(self.dir, "nope.txt")],
            "empty": [self.write("empty.txt", b"")],
            "bad gzip": [self.write("bad.txt.gz", b"not gzip at all")],
            "bad rdb": [self.write("bad.rdb", b"\x00\x00\x00\x10Qgarbage")],
            "truncated rdb": [self.write("cut.rdb", rdb_entry(r_serialize(["x"]))[:-3])],
            "one bad of two": [good, os.path.join(self.dir, "nope.txt")],
        }
        for name, sources in cases.items():
            with self.subTest(name):
                args = [a for s in sources for a in ("--src", s)]
                self.assertEqual(self.run_tool(*args), 3)
                self.assertIn(f"error: {sources[-1]}: ", self.stderr)  # names the file
                self.assertFalse(os.path.exists(os.path.join(self.out, "train.h5")))
        tiny = self.write("tiny.txt", b"abcde")
        self.assertEqual(self.run_tool("--src", tiny, "--val-fraction", "0.1"), 3)  # no val byte
        self.assertIn("too few for a validation split", self.stderr)
        with self.assertRaises(SystemExit):
            self.run_tool("--src", good, "--val-fraction", "1.0")  # argparse: usage error

    def test_directories_and_globs_binary_refused_small_splits_warned(self):
        os.makedirs(os.path.join(self.dir, "books", "b"))
        self.write("books/b/2.txt", TEXT[100:])
        self.write("books/1.txt", TEXT[:100])
        # A directory: its files by name (books/1.txt before books/b/2.txt); a glob the same.
        for spec in (os.path.join(self.dir, "books"), os.path.join(self.dir, "books", "**", "*.txt")):
            with self.subTest(spec):
                self.assertEqual(self.run_tool("--src", spec, "--val-fraction", "0.25"), 0)
                train, _ = self.tokens("train.h5")
                val, _ = self.tokens("val.h5")
                self.assertEqual(bytes(np.concatenate([train, val]).astype(np.uint8)), TEXT)
        # The text is far below 10 windows of validation: a warning, not an error.
        self.assertIn("too small to validate on", self.stderr)
        self.assertEqual(self.run_tool("--src", os.path.join(self.dir, "nothing*.txt")), 3)
        self.assertIn("no file matches", self.stderr)
        # Binary input is refused, naming the file, unless --binary.
        png = self.write("photo.png", b"\x89PNG\r\n\x1a\n\x00\x00" + TEXT)
        self.assertEqual(self.run_tool("--src", png), 3)
        self.assertIn(f"{png}: holds NUL bytes", self.stderr)
        latin = self.write("latin1.txt", "caf\u00e9 ".encode("latin-1") * 50)
        self.assertEqual(self.run_tool("--src", latin), 3)
        self.assertIn("not UTF-8", self.stderr)
        self.assertEqual(self.run_tool("--src", png, "--binary"), 0)

    def test_stale_shards_are_reported(self):
        src = self.write("a.txt", TEXT)
        self.assertEqual(self.run_tool("--src", src, "--shards", "2"), 0)
        self.assertEqual(self.run_tool("--src", src), 0)  # train.h5 next to train-*-of-00002
        self.assertIn("train-00000-of-00002.h5 is left from an earlier conversion", self.stderr)


if __name__ == "__main__":
    unittest.main()
