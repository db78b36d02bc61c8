#!/usr/bin/env python3
"""Reads the TensorBoard event file that Trellis writes with the real tensorboard package.

Runs the hidden unit test "[.tb_write]" (which writes into $TRELLIS_TB_OUT) and checks what
tensorboard's EventAccumulator finds there: tags, steps, float32 values and the text. Needs a
python with tensorboard, e.g. the venv that tools/install-deps.sh makes (ctest passes
TRELLIS_PYTHON_TB):

    /opt/trellis-venv/bin/python tests/tools/test_tensorboard_events.py build/tests/trellis_unit_tests

Without tensorboard it exits 77 (ctest: skipped) and says why, unless the environment has
TRELLIS_REQUIRE_TENSORBOARD=1 (CI), where that is a failure (exit 1).
"""

import os
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.util import tensor_util
except ImportError as e:
    MISSING = (f"{sys.executable} cannot import the tensorboard package ({e}); run "
               "tools/install-deps.sh, or configure with "
               "-DTRELLIS_PYTHON_TB=<python with tensorboard>")
else:
    MISSING = None

SKIPPED = 77  # ctest's SKIP_RETURN_CODE for this test

UNIT_TESTS = None  # the trellis_unit_tests executable, from the command line

# What the [.tb_write] case in tests/unit/test_tensorboard.cpp writes.
LOSS = {10 * s: 1.0 / (s + 1) + 0.1 for s in range(5)}
LR = {10 * s: 3e-4 * s for s in range(5)}
ACCURACY = {1 << 33: 0.875}
TEXTS = {
    "config": (0, "**run** `gpt_small`\n\n| key | value |\n|---|---|\n| lr | 3e-4 |"),
    "notes": (40, "unicode: \u03bb = 0.5, \u2713"),
}


def read_records(path):
    """The events of a TFRecord file, checking every length and masked CRC-32C."""
    with open(path, "rb") as f:
        data = f.read()
    events, at = [], 0
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        assert length_crc == masked_crc32c(header), f"length CRC of record at {at}"
        event = data[at + 12:at + 12 + length]
        assert len(event) == length, f"record at {at} is truncated"
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        assert data_crc == masked_crc32c(event), f"data CRC of record at {at}"
        events.append(event_pb2.Event.FromString(event))
        at += 16 + length
    return events


class TensorBoardEventsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = os.path.join(cls.tmp.name, "tb")
        env = dict(os.environ, TRELLIS_TB_OUT=cls.dir)
        run = subprocess.run([UNIT_TESTS, "[.tb_write]"], env=env, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"{UNIT_TESTS} [.tb_write] failed:\n{run.stdout}\n{run.stderr}")
        cls.files = sorted(os.listdir(cls.dir))
        cls.acc = event_accumulator.EventAccumulator(
            cls.dir, size_guidance={k: 0 for k in event_accumulator.DEFAULT_SIZE_GUIDANCE})
        cls.acc.Reload()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_one_file_with_the_tensorflow_name(self):
        self.assertEqual(len(self.files), 1, self.files)
        parts = self.files[0].split(".")
        self.assertEqual(parts[:3], ["events", "out", "tfevents"])
        self.assertTrue(parts[3].isdigit())
        self.assertEqual(parts[-2], str(int(parts[-2])))  # the pid
        self.assertEqual(parts[-1], "trellis")

    def test_raw_records_and_file_version(self):
        events = read_records(os.path.join(self.dir, self.files[0]))
        self.assertEqual(events[0].file_version, "brain.Event:2")
        self.assertGreater(events[0].wall_time, 1.7e9)
        self.assertEqual(len(events), 1 + len(LOSS) + len(LR) + len(ACCURACY) + len(TEXTS))
        # The text events are exactly what tensorboard's own text summary makes.
        texts = [e for e in events if e.summary.value and e.summary.value[0].HasField("tensor")]
        self.assertEqual(len(texts), len(TEXTS))
        for event in texts:
            tag = event.summary.value[0].tag
            step, markdown = TEXTS[tag]
            self.assertEqual(event.step, step)
            self.assertEqual(event.summary, text_pb(tag, markdown))
        self.assertEqual(self.acc.file_version, 2.0)

    def test_scalars(self):
        tags = self.acc.Tags()
        self.assertEqual(sorted(tags[event_accumulator.SCALARS]),
                         ["eval/accuracy", "train/loss", "train/lr"])
        for tag, expected in (("train/loss", LOSS), ("train/lr", LR), ("eval/accuracy", ACCURACY)):
            got = {e.step: e.value for e in self.acc.Scalars(tag)}
            self.assertEqual(sorted(got), sorted(expected), tag)
            for step, value in expected.items():
                # Stored as float32, read back as a Python float: exact after rounding.
                self.assertEqual(np.float32(got[step]), np.float32(value), (tag, step))
                self.assertEqual(got[step], float(np.float32(value)), (tag, step))

    def test_text(self):
        self.assertEqual(sorted(self.acc.Tags()[event_accumulator.TENSORS]), sorted(TEXTS))
        self.assertEqual(sorted(self.acc.PluginTagToContent("text")), sorted(TEXTS))
        for tag, (step, markdown) in TEXTS.items():
            (event,) = self.acc.Tensors(tag)
            self.assertEqual(event.step, step)
            array = tensor_util.make_ndarray(event.tensor_proto)
            self.assertEqual(array.shape, ())
            self.assertEqual(array.item().decode("utf-8"), markdown)
            self.assertEqual(self.acc.SummaryMetadata(tag).plugin_data.plugin_name, "text")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    if MISSING:
        if os.environ.get("TRELLIS_REQUIRE_TENSORBOARD") == "1":
            sys.exit(f"FAIL: TRELLIS_REQUIRE_TENSORBOARD=1 but {MISSING}")
        print(f"SKIP: {MISSING}")
        sys.exit(SKIPPED)
    UNIT_TESTS = os.path.abspath(sys.argv.pop(1))
    unittest.main()
