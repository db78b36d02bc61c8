#!/usr/bin/python3
"""Tests of tools/plot_plan on small synthetic `trellis plan --json` files.

    /usr/bin/python3 tests/tools/test_plot_plan.py
"""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "plot_plan")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def plan(machine, nodes, dp, tp, hours, cost, spot=None, pareto=False, precision="bf16"):
    """A plan that fits; spot = (spot_hours, cost_spot) or None (no spot offering)."""
    return {"machine": machine, "nodes": nodes, "devices": 8 * nodes, "dp": dp, "tp": tp,
            "pp": 1, "micro_batch": 8, "zero": 1, "recompute": "none", "precision": precision,
            "schedule": "1f1b", "fits": True, "reason": "", "memory_bytes": 12345678,
            "device_memory_bytes": 85899345920, "step_seconds": 0.5, "hours": hours,
            "cost_on_demand": cost, "cost_spot": None if spot is None else spot[1],
            "spot_hours": None if spot is None else spot[0],
            "checkpoint_interval_minutes": None if spot is None else 25.0, "pareto": pareto}


def no_fit(machine, reason):
    return {"machine": machine, "nodes": 1, "devices": 8, "dp": 8, "tp": 1, "pp": 1,
            "micro_batch": 64, "zero": 0, "recompute": "none", "precision": "fp32",
            "schedule": "1f1b", "fits": False, "reason": reason, "memory_bytes": 9e11,
            "device_memory_bytes": 85899345920, "step_seconds": None, "hours": None,
            "cost_on_demand": None, "cost_spot": None, "spot_hours": None,
            "checkpoint_interval_minutes": None, "pareto": False}


def plan_file():
    # Hours from 2 to 80 (log x), costs from 300 to 2400 (linear y); two machines, one without
    # spot; the cheapest plan is also the chosen one.
    return {
        "model": "gpt_small", "target": {"kind": "tokens", "value": 1e10},
        "deadline_hours": 48, "budget_usd": 2000,
        "plans": [
            plan("h100-onprem", 4, 16, 2, 2.0, 2400.0, pareto=True),
            plan("h100-onprem", 2, 8, 2, 4.5, 1100.0, pareto=True),
            plan("aws-p5-48xlarge", 2, 16, 1, 4.0, 1500.0, spot=(4.6, 800.0)),
            plan("aws-p5-48xlarge", 1, 8, 1, 9.0, 1300.0, spot=(10.5, 700.0)),
            plan("h100-onprem", 1, 8, 1, 80.0, 300.0, pareto=True, precision="fp32"),
            no_fit("h100-onprem", "needs 95 GiB per device, has 80"),
        ],
        "best": {"cheapest": 4, "fastest": 0, "chosen": 4},
    }


class PlotPlanTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.json = os.path.join(self.tmp.name, "plan.json")
        self.write(plan_file())

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, doc, path=None):
        with open(path or self.json, "w") as f:
            f.write(doc if isinstance(doc, str) else json.dumps(doc))
        return path or self.json

    def run_tool(self, *args):
        return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True,
                              timeout=120)

    def check_png(self, path):
        self.assertTrue(os.path.isfile(path), path)
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), PNG_SIGNATURE, path)
        self.assertGreater(os.path.getsize(path), 10_000, path)  # a drawn plot, not a stub

    def test_default_out_is_beside_the_json(self):
        result = self.run_tool(self.json)
        self.assertEqual(result.returncode, 0, result.stderr)
        png = os.path.join(self.tmp.name, "plan.png")
        self.assertEqual(result.stdout.split(), [png])
        self.check_png(png)

    def test_out_and_title_linear_axes_no_best_no_lines(self):
        doc = plan_file()
        doc["plans"] = doc["plans"][1:4]  # 4 to 10.5 hours, 700 to 1500 USD: linear axes
        doc["best"] = {"cheapest": None, "fastest": None, "chosen": None}
        doc["deadline_hours"] = 0
        del doc["budget_usd"]
        self.write(doc)
        out = os.path.join(self.tmp.name, "sub", "dir", "plot.png")
        result = self.run_tool(self.json, "--out", out, "--title", "my plans")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split(), [out])
        self.check_png(out)

    def test_label(self):
        import importlib.machinery
        import importlib.util
        sys.path.insert(0, os.path.dirname(TOOL))
        loader = importlib.machinery.SourceFileLoader("plot_plan", TOOL)
        spec = importlib.util.spec_from_loader("plot_plan", loader)
        tool = importlib.util.module_from_spec(spec)
        loader.exec_module(tool)
        doc = plan_file()
        self.assertEqual(tool.plan_label(doc["plans"][1]), "dp8 tp2 pp1 mb8 z1 bf16 (2 nodes)")
        self.assertEqual(tool.plan_label(doc["plans"][4]), "dp8 tp1 pp1 mb8 z1 fp32 (1 node)")
        self.assertTrue(tool.wide([2.0, 80.0]))
        self.assertFalse(tool.wide([4.0, 10.5]))
        data = tool.Plans.load(self.json)
        self.assertEqual(data.machines(), ["h100-onprem", "aws-p5-48xlarge"])
        self.assertEqual(data.best, {"cheapest": 4, "fastest": 0, "chosen": 4})
        self.assertEqual(data.title(), "gpt_small: Time and cost to train 1e+10 tokens")
        self.assertEqual(tool.spot_point(doc["plans"][2]), (4.6, 800.0))
        self.assertIsNone(tool.spot_point(doc["plans"][0]))

    def expect_error(self, text, *args):
        result = self.run_tool(*(args or (self.json,)))
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn(text, result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "plan.png")))
        return result

    def test_missing_file(self):
        missing = os.path.join(self.tmp.name, "no-such.json")
        result = self.expect_error("no such file", missing)
        self.assertIn(missing, result.stderr)

    def test_not_json(self):
        self.write("{\"plans\": [")
        self.expect_error("not JSON")
        self.write("[1, 2]")
        self.expect_error("not a JSON object")

    def test_missing_keys_are_named(self):
        doc = plan_file()
        del doc["plans"]
        self.write(doc)
        self.expect_error("missing key \"plans\"")
        doc = plan_file()
        del doc["plans"][2]["cost_on_demand"]
        self.write(doc)
        self.expect_error("plans[2]: missing key \"cost_on_demand\"")
        doc = plan_file()
        del doc["plans"][5]["fits"]
        self.write(doc)
        self.expect_error("plans[5]: missing key \"fits\"")

    def test_bad_values(self):
        doc = copy.deepcopy(plan_file())
        doc["plans"][1]["hours"] = None
        self.write(doc)
        self.expect_error("\"hours\" must be a positive number")
        doc = plan_file()
        doc["best"]["chosen"] = 9
        self.write(doc)
        self.expect_error("best.chosen = 9 is not an index")
        doc = plan_file()
        doc["best"]["chosen"] = 5
        self.write(doc)
        self.expect_error("best.chosen = 5 is a plan that does not fit")

    def test_no_feasible_plan(self):
        doc = plan_file()
        doc["plans"] = [no_fit("h100-onprem", "needs 95 GiB per device, has 80"),
                        no_fit("cpu-node", "needs 40 GiB per device, has 12")]
        doc["best"] = {"cheapest": None, "fastest": None, "chosen": None}
        self.write(doc)
        result = self.expect_error("no plan fits")
        self.assertIn("needs 40 GiB per device, has 12", result.stderr)
        doc["plans"] = []
        self.write(doc)
        self.expect_error("no plan fits (0 plans)")


if __name__ == "__main__":
    unittest.main()
