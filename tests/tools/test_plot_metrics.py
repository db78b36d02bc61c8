#!/usr/bin/python3
"""Tests of tools/plot_metrics on two small synthetic run directories.

    /usr/bin/python3 tests/tools/test_plot_metrics.py
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "plot_metrics")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
OUTPUTS = ("loss.png", "throughput.png", "time_breakdown.png", "accuracy.png")


def training_line(step, tokens=False):
    line = {"step": step, "epoch": 1, "loss": 2.0 / (1 + step / 10), "lr": 0.01,
            "grad_norm": 1.5, "samples_per_sec": 1000.0 + step, "step_time_s": 0.010,
            "data_time_s": 0.001, "compute_time_s": 0.006, "comm_time_s": 0.001,
            "pipeline_time_s": 0.0005, "optimizer_time_s": 0.0005}
    line["tokens_per_sec"] = line["samples_per_sec"] * 128 if tokens else 0
    return line


def write_run(path, lines):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "metrics.jsonl"), "w") as f:
        for line in lines:
            f.write((line if isinstance(line, str) else json.dumps(line)) + "\n")


class PlotMetricsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.run_a = os.path.join(self.tmp.name, "mlp-run")
        self.run_b = os.path.join(self.tmp.name, "gpt-run")
        # Run A: an older run without pipeline_time_s anywhere, a null (non-finite) loss,
        # a null grad_norm, an evaluation and a checkpoint line.
        lines_a = []
        for step in range(10, 110, 10):
            line = training_line(step)
            del line["pipeline_time_s"]
            if step == 50:
                line["loss"] = None
                line["grad_norm"] = None
            lines_a.append(line)
        lines_a.insert(5, {"step": 50, "epoch": 1, "test_loss": 0.5, "test_accuracy": 0.8})
        lines_a.append({"step": 100, "checkpoint_time_s": 0.25})
        lines_a.append({"step": 100, "epoch": 1, "test_loss": 0.3, "test_accuracy": 0.9})
        write_run(self.run_a, lines_a)
        # Run B: a language model (tokens/s, bits per token), a step time below the sum of
        # its parts (other clips at 0) and a missing optimizer time on one line.
        lines_b = [training_line(step, tokens=True) for step in range(5, 80, 5)]
        lines_b[3]["step_time_s"] = 0.005
        del lines_b[4]["optimizer_time_s"]
        lines_b.append({"step": 75, "epoch": 1, "test_loss": 1.4, "test_accuracy": 0.5,
                        "test_bits_per_token": 2.0})
        write_run(self.run_b, lines_b)
        self.out = os.path.join(self.tmp.name, "plots")

    def tearDown(self):
        self.tmp.cleanup()

    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                              timeout=120)

    def check_pngs(self, folder):
        for name in OUTPUTS:
            path = os.path.join(folder, name)
            self.assertTrue(os.path.isfile(path), path)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), PNG_SIGNATURE, path)
            self.assertGreater(os.path.getsize(path), 10_000, path)  # a drawn plot, not a stub

    def test_two_runs_give_three_pngs(self):
        result = self.run_tool(self.run_a, self.run_b, "--out", self.out, "--labels",
                               "mlp,gpt", "--smooth", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), [os.path.join(self.out, n) for n in OUTPUTS])
        self.check_pngs(self.out)

    def test_centred_smoothing_has_no_lag_and_log_scale_runs(self):
        sys.path.insert(0, os.path.dirname(TOOL))
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("plot_metrics", TOOL)
        spec = importlib.util.spec_from_loader("plot_metrics", loader)
        tool = importlib.util.module_from_spec(spec)
        loader.exec_module(tool)
        falling = [100.0 - i for i in range(20)]
        smooth = tool.centred_mean(falling, 5)
        # A straight line is its own centred mean away from the ends (a trailing mean of 5 would
        # sit 2 above it).
        self.assertEqual(smooth[2:-2], falling[2:-2])
        self.assertEqual(smooth[0], falling[0])  # the ends are their own: no lead either
        self.assertEqual(smooth[1], sum(falling[:3]) / 3)
        result = self.run_tool(self.run_a, "--out", self.out, "--log", "--smooth", "4")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.check_pngs(self.out)

    def test_default_out_is_the_first_run(self):
        result = self.run_tool(self.run_a)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.check_pngs(self.run_a)

    def test_incomplete_last_line_is_skipped(self):
        with open(os.path.join(self.run_b, "metrics.jsonl"), "a") as f:
            f.write('{"step": 80, "loss": 0.')
        result = self.run_tool(self.run_b, "--out", self.out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("incomplete last line", result.stderr)

    def test_bad_input_exits_2_with_a_message(self):
        missing = os.path.join(self.tmp.name, "no-such-run")
        result = self.run_tool(self.run_a, missing)
        self.assertEqual(result.returncode, 2)
        self.assertIn("no such run directory", result.stderr)
        self.assertIn(missing, result.stderr)

        no_file = os.path.join(self.tmp.name, "empty-dir")
        os.makedirs(no_file)
        result = self.run_tool(no_file)
        self.assertEqual(result.returncode, 2)
        self.assertIn("metrics.jsonl: no such file", result.stderr)

        eval_only = os.path.join(self.tmp.name, "eval-only")
        write_run(eval_only, [{"step": 10, "test_loss": 0.5}, {"step": 10, "checkpoint_time_s": 1}])
        result = self.run_tool(eval_only)
        self.assertEqual(result.returncode, 2)
        self.assertIn("no training lines", result.stderr)

        corrupt = os.path.join(self.tmp.name, "corrupt")
        write_run(corrupt, ["{not json", json.dumps(training_line(10))])
        result = self.run_tool(corrupt)
        self.assertEqual(result.returncode, 2)
        self.assertIn("metrics.jsonl:1", result.stderr)

        result = self.run_tool(self.run_a, self.run_b, "--labels", "only-one")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--labels", result.stderr)
        for name in OUTPUTS:  # nothing was written by the failed runs
            self.assertFalse(os.path.exists(os.path.join(self.run_a, name)))


if __name__ == "__main__":
    unittest.main()
