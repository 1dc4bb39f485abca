"""analyze, critical-path and safety as a user runs them: real subprocesses, real files."""

from __future__ import annotations

import csv
import io as _io
import json
import subprocess
import sys
from collections import Counter

import pytest
from measure_kit import KIMI, stages_trace

from orchestrace.cli import main
from orchestrace.core import io
from orchestrace.gen import generate_corpus
from orchestrace.measure import REPORT_KEYS


class Result:
    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def subprocess_run(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "orchestrace", *args], capture_output=True, timeout=120)


@pytest.fixture
def run(capfdbinary):
    """The real entry point (``orchestrace.cli.main``) in this process: exit code, stdout, stderr."""

    def _run(*args: str) -> Result:
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = int(e.code or 0)
        out, err = capfdbinary.readouterr()
        return Result(code, out, err)

    return _run


def test_analyze_json_keys_and_corpus(run, reference_example, tmp_path):
    kimi = tmp_path / "kimi.json"
    io.save(stages_trace(KIMI), kimi)
    r = run("analyze", str(reference_example), str(kimi), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    ex, k = out["traces"]
    assert set(REPORT_KEYS) <= set(ex) and set(REPORT_KEYS) <= set(k)
    assert ex["trace_id"] == "demo-trace-001" and ex["tainted_decisions"] == 1
    assert k["critical_steps"] == 12 and k["tainted_decisions"] is None and k["task_success"] is None
    corpus = out["corpus"]
    assert corpus["traces"] == 2
    assert corpus["summary"]["critical_steps"]["mean"] == (5 + 12) / 2
    assert set(corpus["bands"]) == {"1-10", "11-100"}
    assert corpus["coverage"] == {"E1": True, "E2": True, "E3": True, "E4": True} and corpus["mas_native"]


def test_analyze_table_csv_by_and_write_back(run, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    traces = generate_corpus(6, seed=1, size=60)
    io.save(traces, corpus)
    r = run("analyze", str(corpus), "--by", "topology", "--success-channel", "team")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "by topology" in text and "MAS-native: covers 4 of E1-E4" in text
    r = run("analyze", str(corpus), "--format", "csv")
    rows = list(csv.DictReader(_io.StringIO(r.stdout.decode())))
    assert len(rows) == 6 and set(REPORT_KEYS) <= set(rows[0])
    r = run("analyze", str(corpus), "--format", "csv", "--by", "agent")
    rows = list(csv.DictReader(_io.StringIO(r.stdout.decode())))
    # one row per agent: the traces it acts in and its events, counted here from the corpus
    per_trace = [Counter(e.agent for e in tr.events) for tr in traces]
    want = {
        a: (sum(a in c for c in per_trace), sum(c[a] for c in per_trace)) for a in set().union(*per_trace)
    }
    assert {row["agent"]: (int(row["traces"]), int(row["events"])) for row in rows} == want
    out = tmp_path / "measured.jsonl"
    r = run("analyze", str(corpus), "--write", str(out), "--format", "json")
    assert r.returncode == 0, r.stderr
    back = io.load(out)  # validated on load
    assert all("orchestrace.critical_steps" in tr.metrics for tr in back)
    assert subprocess_run("validate", str(out)).returncode == 0


def test_critical_path_and_safety_output(run, reference_example, tmp_path):
    kimi = tmp_path / "kimi.json"
    io.save(stages_trace(KIMI), kimi)
    r = run("critical-path", str(kimi), "--by", "steps", "--format", "json")
    (cp,) = json.loads(r.stdout)
    assert cp["length"] == 12 and cp["serial"] == 29 and cp["path"][-1]["cumulative"] == 12
    r = run("critical-path", str(reference_example))
    assert r.returncode == 0 and b"critical path 7 s of 7 s serial" in r.stdout
    r = run("safety", str(reference_example), "--format", "json")
    (s,) = json.loads(r.stdout)
    assert s["flows"][0]["path"] == ["e6", "e7", "e8"] and s["flows"][0]["attack_vectors"] == ["AV2", "AV6"]
    r = run("safety", str(kimi))
    assert b"no trust information" in r.stdout


def test_user_errors_are_one_line(run, reference_example, tmp_path):
    for args in (
        ("analyze", str(reference_example), "--format", "xml"),
        ("analyze", str(reference_example), "--by", "colour"),
        ("analyze", str(tmp_path / "missing.json")),
        ("analyze", str(reference_example), "--verifier", "nosuchmodule:f"),
        ("critical-path", str(reference_example), "--by", "tokens"),
    ):
        r = run(*args)
        assert r.returncode != 0 and b"Traceback" not in r.stderr and b"error" in r.stderr, args


def test_as_a_real_process(reference_example):
    r = subprocess_run("safety", str(reference_example), "--format", "yaml")
    assert r.returncode == 2 and b"Traceback" not in r.stderr and r.stderr.count(b"\n") == 1


def test_a_success_channel_no_trace_has_is_named(run, tmp_path):
    """--success-channel teamm (a typo) left E1 empty, exit 0, without a word."""
    corpus = tmp_path / "corpus.jsonl"
    io.save(generate_corpus(3, seed=1, size=30), corpus)
    r = run("analyze", str(corpus), "--success-channel", "teamm")
    err = r.stderr.decode()
    assert r.returncode == 0 and "warning: no trace has rewards.teamm, so E1 (task_success) is empty" in err
    assert "the traces have " in err and "team" in err.split("the traces have ")[1]
    r = run("analyze", str(corpus), "--success-channel", "team")
    assert r.returncode == 0 and b"warning" not in r.stderr


def test_by_agent_measures_a_replayed_trace_once(run, tmp_path):
    # `analyze examples/runs/ --by agent` after `replay` counted the byte-identical replay as a second
    # trace (traces 2, every sum doubled) where ingest stores it once
    from pathlib import Path

    log = Path(__file__).resolve().parents[2] / "examples" / "runs" / "debate-s1.events.jsonl"
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "debate-s1.events.jsonl").write_bytes(log.read_bytes())
    (runs / "debate-s1.replay.events.jsonl").write_bytes(log.read_bytes())
    r = run("analyze", str(runs), "--by", "agent", "--format", "csv", "-q")
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(_io.StringIO(r.stdout.decode())))
    assert {row["agent"]: row["traces"] for row in rows} == dict.fromkeys(
        ("debater_0", "debater_1", "debater_2", "orchestrator"), "1"
    )
    assert (
        "1 duplicate(s) of a trace earlier in the input (same id and content) measured once"
        in r.stderr.decode()
    )
    # the same id with other content is another trace: both measured, and said with both files
    header, *rest = log.read_text().splitlines()
    other = {**json.loads(header), "task_id": "another task"}
    (runs / "debate-s1.replay.events.jsonl").write_text("\n".join([json.dumps(other), *rest]) + "\n")
    r = run("analyze", str(runs), "--by", "agent", "--format", "csv", "-q")
    err = " ".join(r.stderr.decode().split())
    assert r.returncode == 0, err
    assert {row["traces"] for row in csv.DictReader(_io.StringIO(r.stdout.decode()))} == {"2"}
    assert (
        "trace id 'debate-s1' names two traces with different content" in err and "replay.events.jsonl" in err
    )
