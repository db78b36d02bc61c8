#!/usr/bin/python3
"""Tests of tools/idx_to_hdf5.py on tiny synthetic idx files.

    /usr/bin/python3 tests/tools/test_idx_to_hdf5.py
"""

import gzip
import os
import sys
import tempfile
import unittest

import h5py
import numpy as np

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import idx_to_hdf5  # noqa: E402


def write_idx(path, array, magic_ndim=None, truncate=0):
    ndim = array.ndim if magic_ndim is None else magic_ndim
    header = bytes([0, 0, 0x08, ndim]) + b"".join(d.to_bytes(4, "big") for d in array.shape)
    data = header + array.astype(np.uint8).tobytes()
    with gzip.open(path, "wb") as f:
        f.write(data[:len(data) - truncate])


class ConverterTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.src = os.path.join(self.tmp.name, "src")
        self.out = os.path.join(self.tmp.name, "out")
        os.makedirs(self.src)
        rng = np.random.default_rng(0)
        self.train_x = rng.integers(0, 256, size=(10, 4, 4), dtype=np.uint8)
        self.train_y = np.arange(10, dtype=np.uint8) % 3
        self.test_x = rng.integers(0, 256, size=(5, 4, 4), dtype=np.uint8)
        self.test_y = np.arange(5, dtype=np.uint8) % 3
        for prefix, x, y in (("train", self.train_x, self.train_y), ("t10k", self.test_x, self.test_y)):
            write_idx(os.path.join(self.src, f"{prefix}-images-idx3-ubyte.gz"), x)
            write_idx(os.path.join(self.src, f"{prefix}-labels-idx1-ubyte.gz"), y)

    def tearDown(self):
        self.tmp.cleanup()

    def run_tool(self, *extra):
        return idx_to_hdf5.main(["--src", self.src, "--out-dir", self.out, "--num-classes", "3",
                                 "--chunk-rows", "4", *extra])

    def test_single_files_follow_the_format(self):
        self.assertEqual(self.run_tool(), 0)
        scaled = self.train_x.astype(np.float64) / 255.0
        for name, x, y in (("train.h5", self.train_x, self.train_y), ("test.h5", self.test_x, self.test_y)):
            with h5py.File(os.path.join(self.out, name), "r") as f:
                self.assertEqual(f.attrs["format"], "trellis.samples")
                self.assertEqual(int(f.attrs["format_version"]), 1)
                self.assertEqual(int(f.attrs["num_classes"]), 3)
                self.assertAlmostEqual(float(f.attrs["scale"]), 1 / 255, places=7)
                # Both files carry the TRAIN statistics.
                np.testing.assert_allclose(f.attrs["mean"], [scaled.mean()], rtol=1e-6)
                np.testing.assert_allclose(f.attrs["std"], [scaled.std()], rtol=1e-6)
                self.assertEqual(f["samples"].dtype, np.uint8)
                self.assertEqual(f["samples"].shape, (x.shape[0], 1, 4, 4))
                self.assertEqual(f["samples"].chunks, (4, 1, 4, 4))
                self.assertEqual(f["labels"].dtype, np.int32)
                np.testing.assert_array_equal(f["samples"][:, 0], x)
                np.testing.assert_array_equal(f["labels"][:], y)

    def test_shards_concatenate_to_the_whole_set(self):
        self.assertEqual(self.run_tool("--shards", "3"), 0)
        names = sorted(n for n in os.listdir(self.out) if n.startswith("train-"))
        self.assertEqual(names, [f"train-0000{i}-of-00003.h5" for i in range(3)])
        parts = []
        for name in names:
            with h5py.File(os.path.join(self.out, name), "r") as f:
                parts.append(f["samples"][:, 0])
        self.assertEqual([len(p) for p in parts], [3, 3, 4])  # floor(i*n/k) bounds
        np.testing.assert_array_equal(np.concatenate(parts), self.train_x)

    def test_bad_inputs_fail_with_exit_code_3(self):
        write_idx(os.path.join(self.src, "train-labels-idx1-ubyte.gz"), self.train_y, magic_ndim=3)
        self.assertEqual(self.run_tool(), 3)
        write_idx(os.path.join(self.src, "train-labels-idx1-ubyte.gz"), self.train_y, truncate=2)
        self.assertEqual(self.run_tool(), 3)
        write_idx(os.path.join(self.src, "train-labels-idx1-ubyte.gz"), self.train_y[:9])
        self.assertEqual(self.run_tool(), 3)  # 10 images, 9 labels
        write_idx(os.path.join(self.src, "train-labels-idx1-ubyte.gz"), self.train_y + 5)
        self.assertEqual(self.run_tool(), 3)  # labels >= num_classes
        self.assertFalse(os.path.exists(os.path.join(self.out, "train.h5")))


if __name__ == "__main__":
    unittest.main()
