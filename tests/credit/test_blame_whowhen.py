"""Blame on real Who&When failures (Algorithm-Generated subset, 100 runs, ~4 s)."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "blame_whowhen.py"


def test_blame_benchmark_algorithm_generated(data):  # data: needs the public data
    spec = importlib.util.spec_from_file_location("blame_whowhen", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows = {r["method"]: r for r in mod.run("Algorithm-Generated", None, 16, 0)}
    assert all(r["n"] == 100 for r in rows.values())
    # identical assignment cannot tell agents apart: exactly the random baseline
    assert rows["broadcast"]["agent_acc"] == pytest.approx(rows["random"]["agent_acc"])
    assert rows["grpo"]["agent_acc"] == pytest.approx(rows["random"]["agent_acc"])
    # counterfactual credit over the heuristic step scores does better than chance on real failures
    assert rows["loo (downstream removal)"]["agent_acc"] > rows["random"]["agent_acc"] + 0.05
    assert rows["shapley (downstream removal)"]["step_acc"] > rows["random"]["step_acc"]
