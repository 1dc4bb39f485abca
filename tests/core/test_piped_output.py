"""Piped output (stdout/stderr not a terminal): tables keep full ids and headers, and progress
bars come out as one line per stage instead of one endless line of redraws."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrace", *args], capture_output=True, text=True, timeout=120
    )


def test_tables_keep_full_ids_and_headers_when_piped(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    assert run("gen", "-o", str(corpus), "-n", "3", "--size", "30", "--seed", "1").returncode == 0
    r = run("analyze", str(corpus))
    assert r.returncode == 0, r.stderr
    for full in ("gen-centralized-30-1", "gen-hierarchical-30-2", "crit.steps", "parallel_speedup"):
        assert full in r.stdout, full
    assert "…" not in r.stdout


def test_bars_become_one_line_per_stage_when_stderr_is_piped(capsys: pytest.CaptureFixture[str]) -> None:
    """The real tqdm, as the GGUF loader draws it, inside the guard the local model loads under."""
    from tqdm import tqdm

    from orchestrace.runtime.backends.local import bars_as_lines

    with bars_as_lines():
        for _ in tqdm(range(300), desc="Converting tensors", mininterval=0):
            pass
        print("a warning", file=sys.stderr)
        for _ in tqdm(range(5), desc="Loading weights", mininterval=0):
            pass
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 3 and lines[1] == "a warning", lines
    assert lines[0].startswith("Converting tensors: 100%") and "300/300" in lines[0]
    assert lines[2].startswith("Loading weights: 100%")


def test_gym_training_bar_is_one_line_when_piped(capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np

    from orchestrace.learn.datasets import RouteData
    from orchestrace.learn.envs.delegate import DelegateEnv
    from orchestrace.learn.rl.train_gym import train_policy

    n = 20
    qual = np.array([[0.0, 1.0] if i % 2 else [1.0, 1.0] for i in range(n)])
    d = RouteData("toy", [f"q{i}" for i in range(n)], [f"question {i}" for i in range(n)],
                  ["hard" if i % 2 else "easy" for i in range(n)], ["cheap", "strong"], qual,
                  np.tile([0.001, 0.01], (n, 1)))  # fmt: skip
    opts = [{"query": i} for i in range(n)]
    train_policy(
        "reinforce", DelegateEnv(d, lam=0.5), opts, env_name="Delegate", iters=3, batch=8, progress=True
    )
    err = capsys.readouterr().err
    assert err == "train Delegate (reinforce): 3 iterations\n"
