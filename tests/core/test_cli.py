"""The trace commands as a user runs them: real subprocesses, exit codes, JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from orchestrace.core.io import load
from orchestrace.core.model import Trace

NASTY = Path(__file__).parent / "nasty"


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrace", *args], input=stdin, capture_output=True, timeout=120
    )


def _counted(x: dict | Trace) -> tuple:
    """(trace id, events, edges, events per type) of a ``stats`` row or of a loaded trace."""
    if isinstance(x, dict):
        return x["trace_id"], x["events"], x["edges"], x["by_type"]
    return x.trace_id, len(x.events), len(x.edges), dict(Counter(e.type for e in x.events))


def test_validate_exit_codes_and_json(reference_example, tmp_path):
    ok = run("validate", str(reference_example))
    assert ok.returncode == 0, ok.stderr
    bad = run("validate", str(NASTY / "nan.json"), str(reference_example), "--format", "json")
    assert bad.returncode == 1
    out = json.loads(bad.stdout)
    assert [o["valid"] for o in out] == [False, True]
    f = out[0]["findings"][0]
    assert set(f) == {"code", "severity", "pointer", "line", "message"} and f["code"] == "OT004"
    missing = run("validate", str(tmp_path / "missing.json"))
    assert missing.returncode == 2
    usage = run("validate", "--format", "xml", str(reference_example))
    assert usage.returncode == 2 and b"Traceback" not in usage.stderr


def test_validate_stdin_directory_and_glob(reference_example, tmp_path):
    r = run("validate", "-", stdin=reference_example.read_bytes())
    assert r.returncode == 0, r.stdout
    (tmp_path / "a.json").write_bytes(reference_example.read_bytes())
    (tmp_path / "b.json").write_bytes(b"{")
    r = run("validate", str(tmp_path), "--format", "json")
    assert r.returncode == 1 and len(json.loads(r.stdout)) == 2
    r = run("validate", str(tmp_path / "a.*"))
    assert r.returncode == 0


def test_gen_stats_schema(tmp_path):
    out = tmp_path / "c.jsonl.zst"
    r = run("gen", "-o", str(out), "-n", "6", "--size", "50", "--seed", "3")
    assert r.returncode == 0, r.stderr
    first = out.read_bytes()
    run("gen", "-o", str(out), "-n", "6", "--size", "50", "--seed", "3")
    assert out.read_bytes() == first
    r = run("stats", str(out), "--format", "json")
    stats = json.loads(r.stdout)
    # each trace's counts are those of the trace loaded whole (a different reader than stats')
    assert [_counted(s) for s in stats["traces"]] == [_counted(tr) for tr in load(out)]
    assert stats["corpus"]["events"] == sum(s["events"] for s in stats["traces"])
    log = tmp_path / "big.events.jsonl"
    run("gen", "-o", str(log), "--size", "300", "--topology", "debate")
    (s,) = json.loads(run("stats", str(log), "--format", "json").stdout)["traces"]
    (tr,) = load(log)
    assert _counted(s) == _counted(tr) and s["by_type"]["message"] > 100  # a debate is mostly messages
    schema = json.loads(run("schema").stdout)
    assert schema["$schema"].endswith("2020-12/schema") and "t_end" in schema["$defs"]["event"]["properties"]


def test_user_errors_are_one_line_not_tracebacks(tmp_path):
    r = run("gen", "-o", str(tmp_path / "x.json"), "--topology", "ring")
    assert r.returncode == 2 and b"Traceback" not in r.stderr and b"ring" in r.stderr
    r = run("stats", str(NASTY / "truncated.json"))
    assert r.returncode != 0 and b"Traceback" not in r.stderr and b"OT006" in r.stderr


def test_text_output_keeps_brackets_in_paths_and_messages(reference_example, tmp_path):
    # rich reads [..] as markup: file names and messages quoting user input must print verbatim
    bad = tmp_path / "run[1].json"
    bad.write_bytes(b'{"trace_id": "[bold]x"')
    r = run("validate", str(bad))
    assert r.returncode == 1 and b"run[1].json" in r.stdout, r.stdout
    r = run("validate", "--format", "[xml]", str(reference_example))
    assert r.returncode == 2 and b"[xml]" in r.stderr, r.stderr


def test_tables_print_large_numbers_whole(tmp_path):
    # stats printed costs.tokens 123456789 as 1.23457e+08 and critical-path a serial work of
    # 10002 s as 1e+04: rounded numbers in a table the user reads as the count
    events = [{"id": "a", "t": 0, "t_end": 2, "type": "orchestrator_decision", "agent": "o"}]
    events += [
        {"id": f"w{i}", "t": 2, "t_end": 3, "type": "message", "agent": f"w{i}", "to": "o"}
        for i in range(10000)
    ]
    trace = {
        "trace_id": "big", "task_id": "k", "events": events,
        "edges": [{"src": "a", "dst": f"w{i}", "type": "causal"} for i in range(10000)],
        "rewards": {}, "costs": {"tokens": 123456789, "wall_clock_s": 3},
    }  # fmt: skip
    p = tmp_path / "big.json"
    p.write_text(json.dumps(trace))
    stats = run("stats", str(p)).stdout.decode()
    assert "123456789" in stats and "e+" not in stats
    # serial work by hand: o busy [0, 2] = 2 s, each of 10,000 workers 1 s; critical path a -> w: 3 s
    assert "critical path 3 s of 10002 s serial" in run("critical-path", str(p)).stdout.decode()


def test_a_finding_with_no_place_prints_no_empty_place(tmp_path):
    p = tmp_path / "bad.json.gz"
    p.write_bytes(b"not gzip\n")
    out = run("validate", str(p)).stdout.decode()
    assert "  OT007 corrupt or truncated compressed data" in out  # was "  OT007 : corrupt ..."


@pytest.mark.parametrize(
    "args",
    [
        ["credit", "--top", "-1"],  # [:-1]: every unit but the last
        ["credit", "-m", "shapley", "--samples", "0"],  # silently 2 permutations
        ["validate", "--max-findings", "-1"],
        ["view", "--max-content", "-1"],  # [:-1]: each content lost its last character
        ["view", "--port", "70000"],
        ["safety", "--limit", "-1"],
        ["reward", "--step", "-1"],
    ],
)
def test_counts_given_on_the_command_line_cannot_be_negative(args, tmp_path):
    from typer.testing import CliRunner

    from orchestrace.cli import app

    p = tmp_path / "t.json"
    p.write_text(
        '{"trace_id": "t", "task_id": "k", "events": [{"id": "a", "t": 0, "type": "message", "agent": "o"}],'
        ' "edges": [], "rewards": {"team": 1}, "costs": {"tokens": 0, "wall_clock_s": 0}}'
    )
    r = CliRunner().invoke(app, [*args, str(p)])
    assert r.exit_code == 2 and "is not in the range" in r.output, r.output


def test_stdin_is_read_in_the_format_its_content_has():
    # stdin was always one JSON document: a piped .jsonl or event log failed at its line 2
    # with "unexpected content after document"
    ev = '{"id": "a", "t": 0, "type": "message", "agent": "o"}'
    top = '"task_id": "k", "rewards": {}, "costs": {"tokens": 0, "wall_clock_s": 0}'
    jsonl = "".join(f'{{"trace_id": "t{i}", {top}, "events": [{ev}], "edges": []}}\n' for i in range(2))
    log = f'{{"rec": "header", "trace_id": "t9", {top}}}\n{{"rec": "event", {ev[1:]}\n'
    for data, traces in ((jsonl, 2), (log, 1)):
        r = run("validate", "-", "--format", "json", stdin=data.encode())
        assert r.returncode == 0, r.stdout
        assert json.loads(r.stdout)[0]["traces"] == traces
        r = run("stats", "-", "--format", "json", stdin=data.encode())
        assert r.returncode == 0 and len(json.loads(r.stdout)["traces"]) == traces
    r = run("stats", "-", stdin=(jsonl + '{"trace_id": \n').encode())  # the file's name is -
    assert r.returncode == 1 and "- line 3: OT006" in r.stderr.decode()


@pytest.mark.parametrize(
    "args",
    [
        ["-n", "0"],
        ["-n", "-1"],
        ["--size", "0"],
        ["--width", "0"],
        ["--error-rate", "2"],
        ["--error-rate", "nan"],
    ],
)
def test_gen_refuses_counts_and_rates_out_of_range(args, tmp_path):
    # -n -1 printed "wrote -1 trace(s)" and left an empty (invalid) file; -n 0 the same with 0;
    # --size -5, --width 0 and --error-rate nan were taken as they came
    out = tmp_path / "g.jsonl"
    r = run("gen", "-o", str(out), *args)
    assert r.returncode == 2 and not out.exists(), r.stderr
    assert len(r.stderr.decode().strip().splitlines()) == 1  # one line, no traceback


def test_ingest_reads_piped_jsonl(tmp_path):
    # ingest read stdin as one JSON document: two piped traces were "not valid JSON" at line 3
    ev = '{"id": "a", "t": 0, "type": "message", "agent": "o"}'
    top = '"task_id": "k", "rewards": {}, "costs": {"tokens": 0, "wall_clock_s": 0}'
    jsonl = "".join(f'{{"trace_id": "t{i}", {top}, "events": [{ev}], "edges": []}}\n\n' for i in range(2))
    r = run("ingest", "-", "-s", str(tmp_path / "s.duckdb"), "--workers", "1", stdin=jsonl.encode())
    assert r.returncode == 0 and "2 new" in r.stderr.decode(), r.stderr
    log = f'{{"rec": "header", "trace_id": "t9", {top}}}\n{{"rec": "event", {ev[1:]}\n'
    r = run("ingest", "-", "-s", str(tmp_path / "s.duckdb"), "--workers", "1", stdin=log.encode())
    assert r.returncode == 1 and "an event log on stdin" in r.stderr.decode()
