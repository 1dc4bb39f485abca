"""Hostile traces, event logs and foreign logs through every loader and command (see hostile.py).

Each command gets a bounded, derandomized set of generated inputs (seconds in all); the long run
is ``bench/fuzz_hostile.py``. Whatever the input: no exception escapes the CLI, no internal
error (exit 3), validate's verdict is what every other command does with the file, and an
ingest that fails leaves the store as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hostile
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

EXAMPLES = {
    "ingest": 6,
    "import-auto": 20,
    "load": 40,
    "validate-json-multi": 25,
    "repair": 40,
    "query": 40,
    "view-serve": 25,
    "gateway-serve": 25,
    "task-file": 60,
    "ui-serve": 25,
}


@pytest.mark.parametrize("command", hostile.ALL_COMMANDS)
def test_hostile_inputs_end_in_a_finding(command: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    work = tmp_path_factory.mktemp(command)

    @settings(
        max_examples=EXAMPLES.get(command, 12),
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(seed=st.integers(min_value=0, max_value=2**32 - 1))
    def run(seed: int) -> None:
        out = hostile.run_case(seed, command, work / "c")
        assert out.problem is None, f"seed {seed}: {out.problem}"

    run()


@pytest.mark.parametrize(
    ("name", "value", "code"),
    [
        ("int64 max is fine", b"9223372036854775807", None),
        ("2**63", b"9223372036854775808", "OT008"),
        ("2**64", b"18446744073709551616", "OT008"),
        ("400 digits", b"-1" + b"0" * 400, "OT008"),
        ("deep attrs", b"[" * 70 + b"]" * 70, "OT008"),
        ("very deep attrs", b"[" * 5000 + b"]" * 5000, "OT008"),
    ],
)
def test_limits_give_one_verdict(tmp_path: Path, name: str, value: bytes, code: str | None) -> None:
    """A value in event attrs: validate and load agree, and the finding names the limit."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.core.io import load
    from orchestrace.core.validate import validate_path

    tr = hostile.seed_trace()
    text = orjson.dumps({**tr, "events": [{**tr["events"][0], "attrs": {"x": "HOLE"}}, *tr["events"][1:]]})
    f = tmp_path / "t.json"
    f.write_bytes(text.replace(b'"HOLE"', value))
    r = validate_path(f)
    codes = {x.code for x in r.findings if x.severity == "error"}
    try:
        load(f)
        loaded = True
    except OrchestraceError:
        loaded = False
    assert r.valid == loaded, name
    assert (codes == set()) if code is None else (code in codes), (name, r.findings)


@pytest.mark.parametrize("command", ["reward", "credit", "analyze"])
def test_a_failed_command_leaves_no_output_file(tmp_path: Path, command: str) -> None:
    """The second trace of the input is invalid: the command fails after streaming the first,
    and the output does not exist (no empty or half-written file for the next step to trip on)."""
    tr = hostile.seed_trace()
    bad = {**tr, "trace_id": "bad", "events": [{**tr["events"][0], "tokens_in": -1}, *tr["events"][1:]]}
    f = tmp_path / "in.jsonl"
    f.write_bytes(orjson.dumps(tr) + b"\n" + orjson.dumps(bad) + b"\n")
    out = tmp_path / "out.jsonl"
    argv = [command, "-q", str(f), "--write" if command == "analyze" else "-o", str(out)]
    code, _, err, exc = hostile.run_cli(argv)
    assert exc is None and code == 1, err
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.jsonl"]


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "stop", "--bank", "{bank}"],
        ["train", "stop", "--traces", "{trace}", "-o", "{out}"],
        ["run", "vote", "--policy", "stop={policy}", "--out", "{out}"],
    ],
)
def test_bad_input_files_of_learn_commands_exit_1(tmp_path: Path, argv: list[str]) -> None:
    """A bad bank, trace or policy file is bad input (exit 1, one line), not a usage error (2)."""
    files = {
        "bank": tmp_path / "bank.jsonl",
        "trace": tmp_path / "t.events.jsonl",
        "policy": tmp_path / "p.safetensors",
        "out": tmp_path / "out",
    }
    files["bank"].write_text('{"id": "a", "question": "q", "samples": "x"}\n')
    files["trace"].write_text(
        '{"rec": "header", "trace_id": "t", "task_id": "q"}\n{"rec": "event", "id": 5}\n'
    )
    files["policy"].write_bytes(b"\x00garbage")
    code, _, err, exc = hostile.run_cli([a.format(**{k: str(v) for k, v in files.items()}) for a in argv])
    assert exc is None and code == 1, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_validate_reports_every_file_even_after_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug met on one file is that file's OT900 finding (exit 3); the next file is still
    validated and --format json is one complete document."""
    import json

    from orchestrace.core import validate as validate_mod

    good = hostile.good_trace_file(tmp_path)
    boom = tmp_path / "boom.json"
    boom.write_bytes(good.read_bytes())
    real = validate_mod.validate_path

    def flaky(p, **kw):  # a stand-in bug on one file; the real validation runs on the other
        if str(p).endswith("boom.json"):
            raise KeyError("simulated bug")
        return real(p, **kw)

    monkeypatch.setattr("orchestrace.validation.validate_path", flaky)
    code, out, err, exc = hostile.run_cli(["validate", "--format", "json", str(boom), str(good)])
    assert exc is None and code == 3, err
    doc = json.loads(out)
    assert [d["valid"] for d in doc] == [False, True]
    assert doc[0]["findings"][0]["code"] == "OT900"


@pytest.mark.parametrize("fmt", hostile.IMPORTERS)
@pytest.mark.parametrize("data", [b"", b"7", b'"s"', b"null", b"[1, 2]", b'[{"a": 1}]', b'{"a": 1}'])
def test_import_of_a_wrong_shape_is_bad_input(tmp_path: Path, fmt: str, data: bytes) -> None:
    """A scalar, an array or an empty file named with --from: exit 1 (bad input, as validate
    exits on an empty trace), a line saying why, no output file and no traceback."""
    if fmt == "opencode":
        f = tmp_path / "storage" / "session" / "p" / "ses_a.json"
        f.parent.mkdir(parents=True)
    else:
        f = tmp_path / ("x.log" if fmt == "chatdev" else "x.json")
    f.write_bytes(data)
    out = tmp_path / "out.jsonl"
    code, _, err, exc = hostile.run_cli(["import", "--from", fmt, str(f), "-o", str(out), "-q"])
    assert exc is None and code == 1, err
    assert "Traceback" not in err and "OT006" in err and not out.exists()


def _corpus(tmp_path: Path) -> tuple[Path, Path, Path]:
    """good.json, a .jsonl whose second trace is invalid (its first is fine), other.json."""
    tr = hostile.seed_trace()
    good = tmp_path / "good.json"
    good.write_bytes(orjson.dumps(tr))
    other = tmp_path / "other.json"
    other.write_bytes(orjson.dumps({**tr, "trace_id": "other", "events": tr["events"][:6], "edges": []}))
    half = tmp_path / "half.jsonl"
    bad = {**tr, "trace_id": "bad", "events": [{**tr["events"][0], "tokens_in": -1}, *tr["events"][1:]]}
    half.write_bytes(orjson.dumps({**tr, "trace_id": "first"}) + b"\n" + orjson.dumps(bad) + b"\n")
    return good, half, other


@pytest.mark.parametrize(
    "argv",
    [
        ["stats", "--format", "json"],
        ["analyze", "-q", "--format", "json"],
        ["analyze", "-q", "--format", "json", "--by", "agent"],
    ],
)
def test_report_commands_go_on_after_a_bad_file(tmp_path: Path, argv: list[str]) -> None:
    """A file that fails part-way counts for nothing (its first, valid trace included), the
    files after it are still read, the JSON is complete, the exit code is validate's (1); the
    numbers equal those of the good files alone."""
    import json

    good, half, other = _corpus(tmp_path)
    code, out, err, exc = hostile.run_cli([*argv, str(good), str(half), str(other)])
    assert exc is None and code == 1, err
    assert "half.jsonl" in err and "OT" in err and "Traceback" not in err
    doc = json.loads(out)
    ok_code, ok_out, ok_err, _ = hostile.run_cli([*argv, str(good), str(other)])
    assert ok_code == 0, ok_err
    ok = json.loads(ok_out)
    assert [r["trace_id"] for r in doc["traces"]] == [hostile.seed_trace()["trace_id"], "other"]
    assert doc["corpus"] == ok["corpus"]
    assert [(f["code"], f["path"]) for f in doc["failed"]] == [("OT107", str(half))]
    assert ok["failed"] == []


@pytest.mark.parametrize(
    ("name", "events_of", "valid"),
    [
        ("one huge t_end", lambda ev: [{**ev[0], "t": 0.0, "t_end": 1.7e308}, *ev[1:]], True),
        ("t_end sum overflows", lambda ev: [{**e, "t": 0.0, "t_end": 1.7e308} for e in ev], False),
        ("cost_usd sum overflows", lambda ev: [{**e, "cost_usd": 1e308} for e in ev], False),
        (
            "cost_usd sum overflows past a string",
            lambda ev: [{**ev[0], "cost_usd": "x"}] + [{**e, "cost_usd": 1e308} for e in ev[1:]],
            False,
        ),
    ],
)
@pytest.mark.parametrize("fmt", ["json", "events.jsonl"])
def test_float_totals_stay_finite(tmp_path: Path, name: str, events_of: Any, valid: bool, fmt: str) -> None:
    """Summed in float64, cost_usd and t_end must stay finite (OT008), or analyze would print
    an infinite cost or serial work as null; validate and load agree, analyze prints numbers."""
    import json

    from orchestrace.core.errors import OrchestraceError
    from orchestrace.core.io import load
    from orchestrace.core.validate import validate_path

    tr = hostile.seed_trace()
    doc = {**tr, "events": events_of(tr["events"])}
    f = tmp_path / f"t.{fmt}"
    recs = [doc] if fmt == "json" else hostile._log_lines(doc)
    f.write_bytes(b"\n".join(orjson.dumps(r) for r in recs) + b"\n")
    r = validate_path(f)
    try:
        load(f)
        loaded = True
    except OrchestraceError:
        loaded = False
    assert r.valid == loaded == valid, (name, r.findings)
    if not valid:
        assert "OT008" in {x.code for x in r.findings}, r.findings
        return
    code, out, err, _ = hostile.run_cli(["analyze", "-q", "--format", "json", str(f)])
    row = json.loads(out)["traces"][0]
    assert code == 0 and row["serial_work_s"] == row["critical_path_s"] == 1.7e308, err


@pytest.mark.parametrize("where", ["early", "late"])
def test_import_of_a_damaged_gzip_says_so(tmp_path: Path, where: str) -> None:
    """A damaged .jsonl.gz log: damaged before any line is the file's OT007 error (exit 1); after
    some lines, what was read is imported, and the trace and a warning say the rest was not."""
    import gzip
    import json

    lines = (hostile.SEEDS / "codex.jsonl").read_bytes().splitlines()
    filler = [x for x in lines if b"agent_message" in x][:1] * 6000  # > the 1 MB read buffer
    z = bytearray(gzip.compress(b"\n".join(lines + filler) + b"\n", mtime=0))
    i = 30 if where == "early" else int(len(z) * 0.8)
    z[i] ^= 0xFF
    z[i + 1] ^= 0xFF
    f = tmp_path / "rollout.jsonl.gz"
    f.write_bytes(bytes(z))
    out = tmp_path / "out.json"
    code, _, err, exc = hostile.run_cli(["import", "--from", "codex", str(f), "-o", str(out), "-q"])
    assert exc is None and "Traceback" not in err
    if where == "early":
        assert code == 1 and "corrupt or truncated compressed data" in err and not out.exists(), err
        return
    assert code == 0 and "compressed stream damaged after line" in err, err
    info = json.loads(out.read_bytes())["metadata"]["import"]
    assert info["compressed_stream_damaged_after_line"] > len(lines)


def test_claude_code_sidechain_ids_of_another_type(tmp_path: Path) -> None:
    """A sidechain record whose agentId is an object or whose parentUuid is a list (fuzz seed
    20484 of import:claude-code) is imported with the id read as absent, not a crash."""
    import json

    recs = [
        json.loads(x) for x in (hostile.SEEDS / "claude-code.jsonl").read_text().splitlines() if x.strip()
    ]
    recs[2] = {**recs[2], "isSidechain": True, "agentId": {"x": 1}}
    recs[3] = {**recs[3], "isSidechain": True, "parentUuid": [1]}
    f = tmp_path / "session.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    code, _, err, exc = hostile.run_cli(
        ["import", "--from", "claude-code", str(f), "-o", str(tmp_path / "o.jsonl"), "-q"]
    )
    assert exc is None and code == 0, err


@pytest.mark.parametrize(("seed", "command"), [(40471, "import:gemini-cli"), (40438, "import:who-and-when")])
def test_a_foreign_value_nested_past_orjson_is_a_finding(tmp_path: Path, seed: int, command: str) -> None:
    """Found by bench/fuzz_hostile.py --offset 40000: a log whose kept value nests past 255 levels
    (the Gemini session's projectHash) made the import's encoder raise, an internal error (exit 3)."""
    case = hostile.make_case(seed, command)
    main = hostile.write_case(case, tmp_path)
    code, _, err, exc = hostile.run_cli(["import", str(main), "-o", str(tmp_path / "o.jsonl"), "-q"])
    assert exc is None and code == 1, err
    assert "nested deeper than 64 levels" in err


@pytest.mark.parametrize("depth", [70, 300])
def test_an_unknown_event_field_has_the_limits_of_attrs(tmp_path: Path, depth: int) -> None:
    """Unknown event fields are kept verbatim, free-form like attrs: a value nested past 64 levels
    there was valid, and past 255 levels `view` exited 3 (bench/fuzz_hostile.py, ingest seed 40024)."""
    from orchestrace.core.validate import validate_path

    tr = hostile.seed_trace()
    text = orjson.dumps({**tr, "events": [{**tr["events"][0], "note": "HOLE"}, *tr["events"][1:]]})
    f = tmp_path / "t.json"
    f.write_bytes(text.replace(b'"HOLE"', b'{"a":' * depth + b"1" + b"}" * depth))
    r = validate_path(f)
    assert [(x.code, x.pointer[:15]) for x in r.findings] == [("OT008", "/events/0/note/")]
    code, _, err, exc = hostile.run_cli(["view", str(f), "-o", str(tmp_path / "v.html")])
    assert exc is None and code == 1, err


@pytest.mark.parametrize("meta", [b"[1, 2]", b"7", b"null"])
def test_claude_code_sub_agent_meta_that_is_not_an_object(tmp_path: Path, meta: bytes) -> None:
    """Issue 34: a sub-agent .meta.json holding an array (its log holding scalars) was an internal
    error (TypeError); it is bad input (exit 1) naming the .meta.json file."""
    session = tmp_path / "ef000000-0000-4000-8000-000000000001.jsonl"
    session.write_bytes((hostile.SEEDS / "claude-code.jsonl").read_bytes())
    sub = tmp_path / session.stem / "subagents"
    sub.mkdir(parents=True)
    (sub / "agent-a1.jsonl").write_bytes(b'7\n"s"\nnull\n[1]\n')
    (sub / "agent-a1.meta.json").write_bytes(meta)
    out = tmp_path / "o.jsonl"
    code, _, err, exc = hostile.run_cli(
        ["import", "--from", "claude-code", str(session), "-o", str(out), "-q"]
    )
    assert exc is None and code == 1, err
    assert "agent-a1.meta.json" in err and "must be a JSON object" in err and not out.exists()


@pytest.mark.parametrize("number", ["1.2.3", "9" * 400])
def test_chatdev_post_info_number_that_is_malformed(tmp_path: Path, number: str) -> None:
    """Issue 34: a [Post Info] number '1.2.3' was an internal error (ValueError), one of 400 digits
    an infinite cost; both are bad input (exit 1) with the entry's line."""
    log = (hostile.SEEDS / "chatdev.log").read_text()
    n = log.count("\n") + 1
    f = tmp_path / "x.log"
    f.write_text(
        log + f"[2023-25-08 09:40:37 INFO] **[Post Info]**\n\nSoftware Info: \n\n**cost**=${number}\n"
    )
    code, _, err, exc = hostile.run_cli(
        ["import", "--from", "chatdev", str(f), "-o", str(tmp_path / "o.jsonl")]
    )
    assert exc is None and code == 1, err
    assert f"line {n}: [Post Info] entry: cost=" in err and "expected a finite number" in err, err


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_validate_a_folder_with_a_corrupt_gzip(tmp_path: Path, fmt: str) -> None:
    """Issue 34: a corrupt .json.gz beside a good trace in a folder was an internal error (exit 3)
    while walking it, and --format json printed nothing; now each file has its verdict (exit 1)."""
    import gzip
    import json

    hostile.good_trace_file(tmp_path)
    z = bytearray(gzip.compress(orjson.dumps(hostile.seed_trace()), mtime=0))
    z[40] ^= 0xFF
    z[41] ^= 0xFF
    (tmp_path / "bad.json.gz").write_bytes(bytes(z))
    code, out, err, exc = hostile.run_cli(["validate", "--format", fmt, str(tmp_path)])
    assert exc is None and code == 1, err
    if fmt == "table":
        assert b"OT007" in out and b"1/2 file(s) valid" in out
        return
    doc = json.loads(out)
    assert [(Path(d["path"]).name, d["valid"]) for d in doc] == [("bad.json.gz", False), ("good.json", True)]
    assert doc[0]["findings"][0]["code"] == "OT007"


@pytest.mark.parametrize("where", ["id", "src"])
def test_repair_of_an_event_log_with_an_object_for_an_id(tmp_path: Path, where: str) -> None:
    """Found by the fuzz run's repair: an event id or an edge endpoint that is an object made
    repair exit 3 (unhashable type: 'dict'); the event or edge is dropped and the rest repaired."""
    recs = hostile._log_lines(hostile.seed_trace())
    if where == "id":
        recs[1] = {**recs[1], "id": {"x": 1}}
    else:
        edge = next(i for i, r in enumerate(recs) if r["rec"] == "edge")
        recs[edge] = {**recs[edge], "src": {"x": 1}}
        recs[2] = {**recs[2], "tokens_in": -1}  # an event to drop, so edges are filtered
    log = tmp_path / "t.events.jsonl"
    log.write_bytes(b"\n".join(orjson.dumps(r) for r in recs) + b"\n")
    fixed = tmp_path / "fixed.events.jsonl"
    code, _, err, exc = hostile.run_cli(["repair", str(log), "-o", str(fixed)])
    assert exc is None and code == 0, err
    assert hostile.validate_verdict(fixed)


@pytest.mark.parametrize(
    ("sql", "shown"),
    [
        ("SELECT 'infinity'::TIMESTAMP AS v", "9999-12-31"),
        ("SELECT TIMESTAMP '294247-01-10 04:00:54' AS v", "294247-01-10 04:00:54"),
        ("SELECT [DATE '-5000-01-01'] AS v", "5001-01-01 (BC)"),
        ("SELECT 1 AS n, '-infinity'::DATE AS v", "0001-01-01"),
    ],
)
@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_query_of_a_date_outside_python_range(tmp_path: Path, sql: str, shown: str, fmt: str) -> None:
    """Found by the fuzz run's query: pyarrow raised OverflowError converting DuckDB's infinite
    or far dates (exit 3); they print as DuckDB gives them to Python."""
    store = hostile._store(tmp_path)
    code, out, err, exc = hostile.run_cli(["query", sql, "-s", str(store), "-f", fmt])
    assert exc is None and code == 0, err
    assert shown.encode() in out


@pytest.mark.parametrize("sql", ["", ";", "  -- nothing"])
def test_query_of_no_statement_is_a_usage_error(tmp_path: Path, sql: str) -> None:
    """Found by the fuzz run's query: an empty query was an internal error (AttributeError on
    None), now OT320 (exit 2) saying the SQL returns no rows."""
    store = hostile._store(tmp_path)
    code, _, err, exc = hostile.run_cli(["query", sql, "-s", str(store)])
    assert exc is None and code == 2 and "OT320" in err and "returns no rows" in err, err


@pytest.mark.parametrize(("t0_unix", "t_end", "code"), [("x", None, 0), (None, 1e308, 1), (-5e9, None, 1)])
def test_otlp_export_of_times_past_its_range(tmp_path: Path, t0_unix: Any, t_end: Any, code: int) -> None:
    """Found by the fuzz run's export:otlp (seed 40163): a valid t_end of 1e308 made the export exit 3
    (OverflowError); a time OTLP's uint64 nanoseconds cannot hold is OT416 (exit 1), and a
    metadata.t0_unix that is not a number reads as absent (it was a TypeError)."""
    tr = hostile.seed_trace()
    events = [{**tr["events"][0], "t_end": t_end}, *tr["events"][1:]] if t_end else tr["events"]
    f = tmp_path / "t.json"
    f.write_bytes(orjson.dumps({**tr, "events": events, "metadata": {"t0_unix": t0_unix}}))
    assert hostile.validate_verdict(f)
    code_, _, err, exc = hostile.run_cli(["export", str(f), "--to", "otlp", "-o", str(tmp_path / "o.json")])
    assert exc is None and code_ == code, err
    assert code == 0 or "OT416" in err


@pytest.mark.parametrize("name", ["1.json.gz", "1.json.zst"])
@pytest.mark.parametrize("named", [True, False])
def test_a_compressed_who_and_when_file_is_read(tmp_path: Path, name: str, named: bool) -> None:
    """Issue 34 (left open): a gzipped Who&When file was refused as invalid UTF-8 with --from and
    not recognised without it; it is read as the plain file is, with the same trace id."""
    import gzip

    import zstandard

    data = (hostile.SEEDS / "who-and-when.json").read_bytes()
    plain = tmp_path / "plain" / "1.json"
    plain.parent.mkdir()
    plain.write_bytes(data)
    f = tmp_path / name
    f.write_bytes(gzip.compress(data, mtime=0) if name.endswith(".gz") else zstandard.compress(data))
    outs = []
    for src in (plain, f):
        out = tmp_path / f"{src.name}.out.jsonl"
        argv = ["import", str(src), "-o", str(out), "-q", *(["--from", "who-and-when"] if named else [])]
        code, _, err, exc = hostile.run_cli(argv)
        assert exc is None and code == 0, err
        outs.append(orjson.loads(out.read_bytes()))
    assert outs[0]["trace_id"] == outs[1]["trace_id"] and outs[0]["events"] == outs[1]["events"]


@pytest.mark.parametrize("content", [b"hello\n", b'{"a": 1}\n'])
def test_import_of_an_unrecognised_file_is_bad_input(tmp_path: Path, content: bytes) -> None:
    """Issue 34 (left open): a file no importer recognises, without --from, exited 2 (a usage
    error); it is the input's content: exit 1. A folder with no file at all stays exit 2."""
    f = tmp_path / "notes.json"
    f.write_bytes(content)
    code, _, err, exc = hostile.run_cli(["import", str(f), "-o", str(tmp_path / "o.jsonl")])
    assert exc is None and code == 1 and "OT022" in err, err
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err, exc = hostile.run_cli(["import", str(empty), "-o", str(tmp_path / "o.jsonl")])
    assert exc is None and code == 2 and "OT022" in err, err


@pytest.mark.parametrize("damage", ["deep", "cut-gzip", "bad-gzip"])
def test_a_damaged_task_file_is_a_task_file_error(tmp_path: Path, damage: str) -> None:
    """Found by the fuzz run's task-file: a line nested 5,000 deep (RecursionError) and a cut or
    corrupt .jsonl.gz (EOFError, zlib.error) escaped load_tasks (train team --tasks: exit 3);
    each is OT670 naming the file (and the line)."""
    import gzip

    from orchestrace.learn.tasks import TaskFileError, load_tasks

    line = b'{"id": "a", "question": "q?", "answer": "x"}\n'
    if damage == "deep":
        f = tmp_path / "deep.jsonl"
        f.write_bytes(line + b'{"id": "b", "question": "q?", "answer": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")
    else:
        z = gzip.compress(line * 50, mtime=0)
        f = tmp_path / f"{damage}.jsonl.gz"
        f.write_bytes(
            z[: len(z) // 2] if damage == "cut-gzip" else z[:12] + bytes(b ^ 0xFF for b in z[12:30]) + z[30:]
        )
    with pytest.raises(TaskFileError) as e:
        load_tasks(str(f))
    assert e.value.path == str(f) and e.value.exit_code == 1
    assert damage != "deep" or (e.value.line == 2 and "nested deeper" in e.value.message)


@pytest.mark.parametrize("command", ["validate", "stats"])
def test_json_output_with_a_file_name_that_is_not_utf8(tmp_path: Path, command: str) -> None:
    """A folder holding bad\\xff.json (a name that is not UTF-8): orjson refused its path (a str
    with a surrogate escape) and validate/stats --format json exited 3 with no document; the
    name is written with its byte escaped and the document is complete."""
    import json
    import os

    hostile.good_trace_file(tmp_path)
    (tmp_path / os.fsdecode(b"bad\xff.json")).write_bytes(
        orjson.dumps({**hostile.seed_trace(), "trace_id": "other"})
    )
    code, out, err, exc = hostile.run_cli([command, "--format", "json", str(tmp_path)])
    assert exc is None and code == 0, err
    doc = json.loads(out)
    rows = doc if command == "validate" else doc["traces"]
    assert sorted(Path(r["path"]).name for r in rows) == ["bad\\xff.json", "good.json"]
