#!/usr/bin/python3
"""Tests of tools/to_samples.py: image folders, NumPy arrays and CSV into trellis.samples.

    /usr/bin/python3 tests/tools/test_to_samples.py
"""

import contextlib
import io
import os
import sys
import tempfile
import unittest

import h5py
import numpy as np
from PIL import Image

TOOLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools")
sys.path.insert(0, TOOLS)
import to_samples  # noqa: E402


def run(*argv):
    """(exit code, stderr) of the converter."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = to_samples.main(list(argv))
    return code, err.getvalue()


class ToSamplesTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.out = os.path.join(self.dir, "out")
        self.rng = np.random.default_rng(0)

    def tearDown(self):
        self.tmp.cleanup()

    def image_folders(self, sizes):
        """src/<class>/<i>.png, RGB, one image per (class, size) given; returns the arrays."""
        src = os.path.join(self.dir, "images")
        pixels = {}
        for label, (name, shapes) in enumerate(sizes.items()):
            os.makedirs(os.path.join(src, name))
            for i, (h, w) in enumerate(shapes):
                array = self.rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
                path = os.path.join(src, name, f"{i}.png")
                Image.fromarray(array).save(path)
                pixels[path] = (array, label)
        return src, pixels

    def read(self, name):
        with h5py.File(os.path.join(self.out, name), "r") as f:
            return f["samples"][...], f["labels"][...], dict(f.attrs)

    def test_image_folders(self):
        src, pixels = self.image_folders({"cat": [(4, 5)] * 6, "dog": [(4, 5)] * 4})
        code, err = run("images", "--src", src, "--out-dir", self.out, "--test-fraction", "0.2")
        self.assertEqual(code, 0, err)
        x, y, attrs = self.read("train.h5")
        tx, ty, tattrs = self.read("test.h5")
        self.assertEqual((x.shape, tx.shape), ((8, 3, 4, 5), (2, 3, 4, 5)))
        self.assertEqual(x.dtype, np.uint8)
        self.assertEqual(attrs["format"], "trellis.samples")
        self.assertEqual(int(attrs["num_classes"]), 2)
        self.assertEqual([n.decode() if isinstance(n, bytes) else n for n in attrs["class_names"]],
                         ["cat", "dog"])
        self.assertAlmostEqual(float(attrs["scale"]), 1 / 255, places=7)
        # Every image is there once, with its class, channels first.
        stored = {(s.tobytes(), int(l)) for s, l in zip(np.concatenate([x, tx]), np.concatenate([y, ty]))}
        wanted = {(a.transpose(2, 0, 1).tobytes(), l) for a, l in pixels.values()}
        self.assertEqual(stored, wanted)
        # mean and std per channel of the training split, after the scale; the test split too.
        values = x.astype(np.float64) / 255
        np.testing.assert_allclose(attrs["mean"], values.mean(axis=(0, 2, 3)), rtol=1e-5)
        np.testing.assert_allclose(attrs["std"], values.std(axis=(0, 2, 3)), rtol=1e-5)
        np.testing.assert_array_equal(tattrs["mean"], attrs["mean"])

    def test_images_of_another_size(self):
        src, _ = self.image_folders({"a": [(4, 5), (6, 5)], "b": [(4, 5)]})
        code, err = run("images", "--src", src, "--out-dir", self.out)
        self.assertEqual(code, 3)
        self.assertIn("1.png", err)
        self.assertIn("--size", err)
        self.assertFalse(os.path.exists(os.path.join(self.out, "train.h5")))
        code, err = run("images", "--src", src, "--out-dir", self.out, "--size", "3x3",
                        "--test-fraction", "0", "--mode", "L")
        self.assertEqual(code, 0, err)
        x, _, _ = self.read("train.h5")
        self.assertEqual(x.shape, (3, 1, 3, 3))
        # Not an image: named.
        with open(os.path.join(src, "a", "broken.png"), "wb") as f:
            f.write(b"not a png")
        code, err = run("images", "--src", src, "--out-dir", self.out, "--size", "3x3")
        self.assertEqual(code, 3)
        self.assertIn("broken.png", err)

    def test_arrays_npz_and_npy(self):
        x = self.rng.normal(size=(20, 6)).astype(np.float32)
        x[:, 2] = 5.0  # a constant feature: std 1, with a warning
        y = np.arange(20) % 4
        np.savez(os.path.join(self.dir, "d.npz"), x=x, y=y)
        code, err = run("arrays", "--src", os.path.join(self.dir, "d.npz"), "--out-dir", self.out,
                        "--test-fraction", "0.25", "--shards", "2")
        self.assertEqual(code, 0, err)
        self.assertIn("constant", err)
        parts = [self.read(f"train-0000{i}-of-00002.h5") for i in range(2)]
        train = np.concatenate([p[0] for p in parts])
        self.assertEqual(train.shape, (15, 6))
        attrs = parts[0][2]
        np.testing.assert_allclose(attrs["mean"], train.mean(axis=0), rtol=1e-5, atol=1e-6)
        self.assertEqual(float(attrs["std"][2]), 1.0)
        self.assertEqual(self.read("test-00000-of-00002.h5")[0].shape[0] +
                         self.read("test-00001-of-00002.h5")[0].shape[0], 5)
        # .npy pairs; NaN refused, naming the sample.
        x[7, 1] = np.nan
        np.save(os.path.join(self.dir, "x.npy"), x)
        np.save(os.path.join(self.dir, "y.npy"), y)
        code, err = run("arrays", "--src", os.path.join(self.dir, "x.npy"), "--labels",
                        os.path.join(self.dir, "y.npy"), "--out-dir", self.out)
        self.assertEqual(code, 3)
        self.assertIn("NaN", err)
        self.assertIn("sample 7", err)
        code, err = run("arrays", "--src", os.path.join(self.dir, "d.npz"), "--y-key", "label",
                        "--out-dir", self.out)
        self.assertEqual(code, 3)
        self.assertIn("no array label", err)

    def test_csv_with_header_and_class_names(self):
        path = os.path.join(self.dir, "t.csv")
        with open(path, "w") as f:
            f.write("species,length,width\n")
            for i in range(12):
                f.write(f"{['setosa', 'virginica', 'versicolor'][i % 3]},{i * 0.5},{i % 5}\n")
        code, err = run("csv", "--src", path, "--label-column", "species", "--out-dir", self.out,
                        "--test-fraction", "0")
        self.assertEqual(code, 0, err)
        x, y, attrs = self.read("train.h5")
        self.assertEqual(x.shape, (12, 2))
        self.assertEqual(list(y[:3]), [0, 2, 1])  # classes in name order
        self.assertEqual(int(attrs["num_classes"]), 3)
        with open(path, "a") as f:
            f.write("setosa,1.0\n")
        code, err = run("csv", "--src", path, "--label-column", "species", "--out-dir", self.out)
        self.assertEqual(code, 3)
        self.assertIn("line 14 has 2 fields", err)


if __name__ == "__main__":
    unittest.main()
