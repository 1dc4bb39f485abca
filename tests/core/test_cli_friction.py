"""The first hour's friction, as a user meets it: real subprocesses, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrace.core.io import load


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrace", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "c.jsonl"
    r = run("gen", "-o", str(out), "-n", "4", "--size", "30", "--seed", "7")
    assert r.returncode == 0, r.stderr
    return out


def test_stats_prints_one_corpus_total(corpus: Path) -> None:
    traces = load(corpus)
    r = run("stats", str(corpus))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("┏") == 1 and "corpus: 4 traces in 1 file(s)" in r.stdout
    row = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in r.stdout.splitlines()
        if line.count("│") == 3
    }
    assert int(row["events"]) == sum(len(t.events) for t in traces)
    assert int(row["edges"]) == sum(len(t.edges) for t in traces)
    assert int(row["type tool_call"]) == sum(e.type == "tool_call" for t in traces for e in t.events)
    assert not any(t.trace_id in r.stdout for t in traces)
    listed = run("stats", str(corpus), "--per-trace")
    assert listed.stdout.count("┏") == 2 and all(t.trace_id in listed.stdout for t in traces)
    (corpus.parent / "one.json").write_bytes(
        json.dumps(json.loads(corpus.read_text().splitlines()[0])).encode()
    )
    one = run("stats", str(corpus.parent / "one.json"))  # one trace: its own table, no total
    assert one.stdout.count("┏") == 1 and traces[0].trace_id in one.stdout and "corpus:" not in one.stdout
    assert len(json.loads(run("stats", str(corpus), "--format", "json").stdout)) == 4
