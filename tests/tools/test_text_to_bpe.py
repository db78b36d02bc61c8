#!/usr/bin/python3
"""Tests of tools/text_to_bpe.py on small corpora in every input format: the token ids are
Hugging Face tokenizers' own encoding of each document followed by the end-of-text id, the
splits and shards partition the stream as documented, and bad input ends with exit code 3.

    /opt/trellis-venv/bin/python tests/tools/test_text_to_bpe.py   (needs tokenizers, pyarrow)
"""
import contextlib
import glob
import gzip
import io
import json
import os
import sys
import tempfile
import unittest

import h5py
import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
try:
    import pyarrow
    import pyarrow.parquet
    import tokenizers
except ImportError as e:  # the tools' venv is missing: say so and skip
    print(f"skipped: {e} (tools/install-deps.sh installs tokenizers and pyarrow)")
    sys.exit(77)
import text_to_bpe  # noqa: E402

DOCS = [f"Document {i}: It is a truth universally acknowledged, that a single man in "
        f"possession of a good fortune, must be in want of a wife. Café naïve {i * 7}."
        for i in range(40)]


def run(*argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = text_to_bpe.main(list(argv))
    return code, err.getvalue()


def read_stream(out_dir, split):
    files = sorted(glob.glob(os.path.join(out_dir, f"{split}*.h5")))
    parts = []
    for path in files:
        with h5py.File(path, "r") as f:
            parts.append(f["tokens"][...])
    return np.concatenate(parts) if parts else np.zeros(0, np.uint16), files


class TextToBpe(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        # The same 40 documents as plain text files, JSON Lines (gzip) and Parquet.
        os.makedirs(os.path.join(self.dir, "txt"))
        for i, doc in enumerate(DOCS[:10]):
            with open(os.path.join(self.dir, "txt", f"{i:02d}.txt"), "w") as f:
                f.write(doc)
        with gzip.open(os.path.join(self.dir, "docs.jsonl.gz"), "wt") as f:
            for doc in DOCS[10:25]:
                f.write(json.dumps({"id": 1, "body": doc}) + "\n")
        table = pyarrow.table({"text": DOCS[25:]})
        pyarrow.parquet.write_table(table, os.path.join(self.dir, "docs.parquet"))
        self.sources = ["--src", os.path.join(self.dir, "txt"), "--src",
                        os.path.join(self.dir, "docs.jsonl.gz"), "--text-field", "body",
                        "--src", os.path.join(self.dir, "docs.parquet")]

    def tearDown(self):
        self.tmp.cleanup()

    def test_ids_are_tokenizers_own_encoding(self):
        out = os.path.join(self.dir, "out")
        code, err = run(*self.sources, "--out-dir", out, "--vocab-size", "300",
                        "--val-fraction", "0.25", "--val-block", "100", "--shard-tokens", "150")
        self.assertEqual(code, 0, err)
        tok = tokenizers.Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        eot = tok.token_to_id("<|endoftext|>")
        expected = []
        for doc in DOCS:
            expected += tok.encode(doc, add_special_tokens=False).ids + [eot]
        expected = np.array(expected)
        train, train_files = read_stream(out, "train")
        val, _ = read_stream(out, "val")
        # Of every 100 tokens, the first 75 are train and the last 25 val.
        pos = np.arange(expected.size)
        np.testing.assert_array_equal(train, expected[pos % 100 < 75])
        np.testing.assert_array_equal(val, expected[pos % 100 >= 75])
        # Shards of at most 150 tokens, named -of-K, with the attributes and the tokenizer.
        self.assertGreater(len(train_files), 1)
        self.assertTrue(train_files[0].endswith(f"-of-{len(train_files):05d}.h5"), train_files)
        with h5py.File(train_files[0], "r") as f:
            self.assertEqual(f["tokens"].dtype, np.uint16)
            self.assertLessEqual(f["tokens"].shape[0], 150)
            self.assertEqual(f.attrs["format"], "trellis.tokens")
            self.assertEqual(int(f.attrs["vocab_size"]), tok.get_vocab_size())
            self.assertEqual(f.attrs["tokenizer"], "bpe")
            self.assertEqual(int(f.attrs["eot_id"]), eot)
            stored = bytes(f["tokenizer_json"][...])
        with open(os.path.join(out, "tokenizer.json"), "rb") as f:
            self.assertEqual(stored, f.read())
        self.assertEqual(tok.decode(expected[:20].tolist()).split(":")[0], "Document 0")

    def test_a_given_tokenizer_is_used_as_it_is(self):
        first = os.path.join(self.dir, "first")
        self.assertEqual(run(*self.sources, "--out-dir", first, "--vocab-size", "280")[0], 0)
        again = os.path.join(self.dir, "again")
        code, err = run("--src", os.path.join(self.dir, "docs.parquet"), "--out-dir", again,
                        "--tokenizer", os.path.join(first, "tokenizer.json"), "--val-fraction", "0")
        self.assertEqual(code, 0, err)
        tok = tokenizers.Tokenizer.from_file(os.path.join(first, "tokenizer.json"))
        eot = tok.token_to_id("<|endoftext|>")
        want = sum((tok.encode(d, add_special_tokens=False).ids + [eot] for d in DOCS[25:]), [])
        got, files = read_stream(again, "train")
        np.testing.assert_array_equal(got, want)
        self.assertEqual([os.path.basename(f) for f in files], ["train.h5"])
        self.assertEqual(read_stream(again, "val")[1], [])

    def test_bad_input_is_exit_3_naming_the_place(self):
        bad = os.path.join(self.dir, "bad.jsonl")
        with open(bad, "w") as f:
            f.write(json.dumps({"text": "fine"}) + "\n{not json\n")
        code, err = run("--src", bad, "--out-dir", os.path.join(self.dir, "o"), "--vocab-size", "300")
        self.assertEqual(code, 3)
        self.assertIn("bad.jsonl:2", err)
        code, err = run("--src", os.path.join(self.dir, "docs.parquet"), "--text-column", "body",
                        "--out-dir", os.path.join(self.dir, "o"), "--vocab-size", "300")
        self.assertEqual(code, 3)
        self.assertIn("no column 'body'", err)


if __name__ == "__main__":
    unittest.main()
