"""Formats, compression, streaming event logs and the nasty-input corpus."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import orchestrace as ot
from orchestrace.core.errors import BadInput, InvalidTrace, LoadError
from orchestrace.core.io import EventLogWriter, dumps
from orchestrace.core.model import Edge, Event
from orchestrace.core.read import iter_log_records
from orchestrace.core.validate import validate_path
from orchestrace.gen import generate

NASTY = Path(__file__).parent / "nasty"

EXPECTED = {
    "truncated.json": "OT006",
    "invalid_utf8.json": "OT002",
    "not_json.json": "OT003",
    "nan.json": "OT004",
    "infinity.json": "OT004",
    "huge_number.json": "OT004",
    "dupkey.json": "OT005",
    "array.json": "OT102",
    "string.json": "OT102",
    "empty.json": "OT006",
    "whitespace.json": "OT006",
    "deep.json": "OT008",  # nested past core.limits.MAX_DEPTH
    "bad_line.jsonl": "OT003",
    "no_header.events.jsonl": "OT110",
    "bad_rec.events.jsonl": "OT110",
    "truncated_last.events.jsonl": "OT006",
    "truncated.json.gz": "OT007",
    "corrupt.json.zst": "OT007",
    "not_gzip.json.gz": "OT007",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_nasty_inputs_give_a_coded_finding(name):
    r = validate_path(NASTY / name)
    assert not r.valid
    codes = [f.code for f in r.findings]
    assert EXPECTED[name] in codes, r.findings
    assert all(f.message for f in r.findings)


def test_every_nasty_file_is_covered():
    assert {p.name for p in NASTY.iterdir()} == set(EXPECTED) | {"bom.json"}


def test_bom_is_accepted():
    assert validate_path(NASTY / "bom.json").valid


def test_a_second_bom_is_not_json_rather_than_bad_utf8(tmp_path):
    # two byte-order marks are valid UTF-8; the file was reported as "invalid UTF-8 byte" (OT002)
    p = tmp_path / "two_boms.json"
    p.write_bytes(b"\xef\xbb\xbf" + (NASTY / "bom.json").read_bytes())
    r = validate_path(p)
    assert [f.code for f in r.findings] == ["OT003"]
    assert "byte-order mark" in r.findings[0].message


def test_line_numbers_for_jsonl_and_logs():
    r = validate_path(NASTY / "bad_line.jsonl")
    # lines 1 and 3 were still checked (line 3 repeats line 1's trace: a warning)
    assert [(f.code, f.line) for f in r.findings] == [("OT003", 2), ("OT216", 3)]
    assert r.traces == 3
    r = validate_path(NASTY / "truncated_last.events.jsonl")
    assert r.findings[0].line == 3


def test_a_jsonl_syntax_error_names_its_line_and_column(tmp_path):
    # a JSONL line said "at (char 23)" (a 0-based offset), a .json file "at column 24"
    p = tmp_path / "t.jsonl"
    p.write_bytes(b'{"a": 1}\n{"trace_id": "x", "b": nul}\n{"c": [1, 2\n')
    found = [(f.code, f.line, f.message) for f in validate_path(p).findings if f.code != "OT101"]
    assert [(c, n) for c, n, _ in found if c in ("OT003", "OT006")] == [("OT003", 2), ("OT006", 3)]
    assert "at column 24:" in found[-2][2] and "at column 12:" in found[-1][2]


def test_invalid_utf8_names_the_line_and_column_of_the_bad_byte(tmp_path):
    # orjson puts every encoding error at char 0: a .json file was reported at line 1
    p = tmp_path / "t.json"
    p.write_bytes(b'{\n  "trace_id": "x",\n  "task_id": "ab\xffc"\n}\n')
    [f] = validate_path(p).findings
    assert (f.code, f.line) == ("OT002", 3)
    assert "0xff at column 17" in f.message
    p = tmp_path / "t.jsonl"
    p.write_bytes(b'{"a": 1}\n{"trace_id": "\xfe"}\n')
    f = validate_path(p).findings[-1]
    assert (f.code, f.line) == ("OT002", 2)
    assert "0xfe at column 15" in f.message


def test_duplicate_key_in_an_event_log_points_into_the_trace(tmp_path):
    # the pointer was the record's own ("/" for a duplicate in event 1), not /events/1
    p = tmp_path / "run.events.jsonl"
    p.write_bytes(
        b'{"rec":"header","trace_id":"x","task_id":"y","rewards":{},"costs":{"tokens":1,"wall_clock_s":1}}\n'
        b'{"rec":"event","id":"a","t":0,"type":"message","agent":"o"}\n'
        b'{"rec":"event","id":"b","id":"b","t":1,"type":"message","agent":"o","attrs":{"k":1,"k":2}}\n'
        b'{"rec":"edge","src":"a","dst":"b","type":"causal","type":"message"}\n'
    )
    dups = [
        (f.line, f.pointer, f.message.split("'")[1]) for f in validate_path(p).findings if f.code == "OT005"
    ]
    assert dups == [(3, "/events/1", "id"), (4, "/edges/0", "type")]


def test_max_findings_bounds_unparsable_jsonl_lines(tmp_path):
    # a pretty-printed trace saved as .jsonl: every line fails to parse, and all were listed
    # whatever --max-findings said
    p = tmp_path / "pretty.jsonl"
    p.write_text("{\n" + "".join(f'  "k{i}": {i},\n' for i in range(20)) + '  "z": 0\n}\n')
    r = validate_path(p, max_findings=3)
    assert [f.line for f in r.findings] == [1, 2, 3] and r.truncated == 20 and not r.valid


def test_a_limit_in_an_event_log_record_points_into_the_trace(tmp_path):
    # the pointer was the record's own: "line 4 /tokens_in" for the second event
    p = tmp_path / "run.events.jsonl"
    p.write_bytes(
        b'{"rec":"header","trace_id":"x","task_id":"y","rewards":{},"costs":{"tokens":1,"wall_clock_s":1}}\n'
        b'{"rec":"event","id":"a","t":0,"type":"message","agent":"o"}\n'
        b'{"rec":"edge","src":"a","dst":"b","type":"causal","x":{"rec":[1]}}\n'
        b'{"rec":"event","id":"b","t":1,"type":"message","agent":"o","tokens_in":1180591620717411303424}\n'
    )
    [f] = validate_path(p).findings
    assert (f.code, f.line, f.pointer) == ("OT008", 4, "/events/1/tokens_in")


def test_a_jsonl_line_beyond_a_limit_keeps_its_pointer_in_the_collected_findings(tmp_path):
    # ingest reads JSONL so (collect_errors): it said "t.jsonl:1: OT008 ..." with no pointer
    from orchestrace.core.read import iter_raw
    from orchestrace.core.validate import check_raw

    p = tmp_path / "t.jsonl"
    p.write_bytes(b'{"trace_id": "x", "events": [{"tokens_in": 1180591620717411303424}]}\n')
    [raw] = list(iter_raw(p, collect_errors=True))
    [f] = check_raw(raw)[0]
    assert (f.code, f.line, f.pointer) == ("OT008", 1, "/events/0/tokens_in")


def test_the_survey_edge_label_msg_gets_a_hint(tmp_path):
    # spec 1.2: the survey's Definition 3 labels an edge msg; the schema writes message
    tr = generate(seed=3, size=10)
    d = orjson.loads(dumps(tr))
    d["edges"][0]["type"] = "msg"
    p = tmp_path / "t.json"
    p.write_bytes(orjson.dumps(d))
    [f] = validate_path(p).findings
    assert (f.code, f.pointer) == ("OT104", "/edges/0/type") and f.message.endswith("is written message)")


def test_missing_file_is_io_error(tmp_path):
    r = validate_path(tmp_path / "nope.json")
    assert r.findings[0].code == "OT001"


def test_load_raises_with_all_findings(tmp_path):
    tr = generate(seed=3, size=20)
    d = orjson.loads(dumps(tr))
    d["events"][0]["t"] = -1
    d["edges"][0]["dst"] = "zzz"
    p = tmp_path / "bad.json"
    p.write_bytes(orjson.dumps(d))
    with pytest.raises(InvalidTrace) as ei:
        ot.load(p)
    assert {f.code for f in ei.value.findings} >= {"OT107", "OT202"}


@pytest.mark.parametrize("ext", ["json", "jsonl", "events.jsonl"])
@pytest.mark.parametrize("comp", ["", ".gz", ".zst"])
def test_round_trip_all_formats_byte_stable(tmp_path, ext, comp):
    tr = generate(seed=7, size=80, topology="hierarchical")
    p = tmp_path / f"t.{ext}{comp}"
    ot.save(tr, p)
    back = ot.load_one(p)
    assert dumps(back) == dumps(tr)
    first = p.read_bytes()
    ot.save(back, p)
    assert p.read_bytes() == first  # deterministic bytes, compressed too


def test_jsonl_many_traces(tmp_path):
    traces = [generate(seed=s, size=30) for s in range(5)]
    ot.save(traces, tmp_path / "c.jsonl.gz")
    assert [t.trace_id for t in ot.load(tmp_path / "c.jsonl.gz")] == [t.trace_id for t in traces]


def test_json_refuses_several_traces(tmp_path):
    with pytest.raises(LoadError):
        ot.save([generate(seed=1, size=10), generate(seed=2, size=10)], tmp_path / "x.json")


@pytest.mark.parametrize("comp", ["", ".gz", ".zst"])
def test_event_log_appends_and_streams(tmp_path, comp):
    tr = generate(seed=11, size=40)
    p = tmp_path / f"run.events.jsonl{comp}"
    with EventLogWriter(p, {"trace_id": tr.trace_id, "task_id": tr.task_id, "topology": tr.topology}) as w:
        for e in tr.events:
            w.event(e)
        for x in tr.edges:
            w.edge(x.src, x.dst, x.type)
        w.update(rewards=tr.rewards, costs=tr.costs)
    back = ot.load_one(p)
    assert [e.id for e in back.events] == [e.id for e in tr.events]
    assert back.rewards == tr.rewards and back.costs == tr.costs
    kinds = [rec["rec"] for _, rec in iter_log_records(p)]
    assert kinds[0] == "header" and kinds[-1] == "update" and kinds.count("event") == len(tr.events)


def test_event_log_record_writes_an_event_and_its_edges_as_lines(tmp_path):
    p = tmp_path / "run.events.jsonl"
    with EventLogWriter(p, {"trace_id": "x", "task_id": "y"}) as w:
        w.record(Event(id="e0", t=0, type="spawn", agent="o", to="a"), [])
        w.record(
            Event(id="e1", t=0.5, type="message", agent="a", to="o", tokens_in=3), [Edge("e0", "e1", "spawn")]
        )
        w.record(Event(id="e2", t=1, type="return", agent="a", extra={"note": "kept"}), [])
    lines = p.read_bytes().splitlines()[1:]
    assert lines == [
        b'{"rec":"event","id":"e0","t":0,"type":"spawn","agent":"o","to":"a"}',
        b'{"rec":"event","id":"e1","t":0.5,"type":"message","agent":"a","to":"o","tokens_in":3}',
        b'{"rec":"edge","src":"e0","dst":"e1","type":"spawn"}',
        b'{"rec":"event","id":"e2","t":1,"type":"return","agent":"a","note":"kept"}',
    ]


def test_event_log_without_costs_derives_them(tmp_path):
    # no costs record: tokens 3 + 4 + 5; wall clock from the first start (1.0) to the latest end,
    # the tool call's t_end 4.5 (after the last start, 2.5); one tool call, one message, $0.25
    p = tmp_path / "run.events.jsonl"
    with EventLogWriter(p, {"trace_id": "x", "task_id": "y"}) as w:
        w.event(Event(id="a", t=1.0, type="tool_call", agent="o", tool="x", t_end=4.5, tokens_in=3))
        w.event(Event(id="b", t=2.0, type="message", agent="o", to="o", tokens_out=4, cost_usd=0.25))
        w.event(Event(id="c", t=2.5, type="aggregate", agent="o", tokens_in=5))
    costs = {"tokens": 12, "wall_clock_s": 3.5, "tool_calls": 1, "messages": 1, "usd": 0.25}
    assert ot.load_one(p).costs == costs


def test_truncated_gzip_member_is_reported_not_hung(tmp_path):
    tr = generate(seed=5, size=200)
    p = tmp_path / "t.jsonl.gz"
    ot.save(tr, p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])
    r = validate_path(p)
    assert not r.valid and r.findings[-1].code in ("OT006", "OT007")


@pytest.mark.parametrize(
    "text,dup",
    [
        (b'{"a": 1, "b": {"c": 1, "c": 2}}', ("/b", "c")),
        (b'{"a\\\\": 1, "a\\\\": 2}', ("", "a\\")),  # key ending in a backslash: exact path
        (b'{"x": "say \\"y\\": z", "x": 3}', ("", "x")),  # escaped quote+colon in a value
        (b'{"x" : 1, "x" : 2}', ("", "x")),  # whitespace before the colon
        (b'{"x": "say \\"y\\": z", "y": 3}', None),
        (b'[{"k": 1}, {"k": 2}]', None),
    ],
)
def test_duplicate_key_detection(text, dup):
    from orchestrace.core.read import find_duplicate_key

    assert find_duplicate_key(text, orjson.loads(text)) == dup
    assert find_duplicate_key(text) == dup


def test_event_log_struct_path_taken_and_agrees_with_dict_path(tmp_path):
    from orchestrace.core.read import read_event_log_raw
    from orchestrace.core.validate import _check_log_fast, check_raw

    tr = generate(seed=4, size=300, topology="hierarchical")
    p = tmp_path / "run.events.jsonl"
    ot.save(tr, p)
    assert _check_log_fast(str(p), 100) == ([], 0)
    # a semantic error (an edge that goes back in time) is found on the fast path, with its line
    lines = p.read_bytes().splitlines(keepends=True)
    edge_line = next(i for i, x in enumerate(lines) if x.startswith(b'{"rec":"edge"'))
    rec = orjson.loads(lines[edge_line])
    lines[edge_line] = (
        orjson.dumps({"rec": "edge", "src": rec["dst"], "dst": rec["src"], "type": rec["type"]}) + b"\n"
    )
    p.write_bytes(b"".join(lines))
    fast = _check_log_fast(str(p), 100)
    assert fast is not None and [(f.code, f.line) for f in fast[0]][0] == ("OT204", edge_line + 1)
    slow, _ = check_raw(read_event_log_raw(str(p), check_duplicates=True))
    assert sorted((f.code, f.pointer, f.line) for f in fast[0]) == sorted(
        (f.code, f.pointer, f.line) for f in slow
    )
    # an unknown field sends the log to the dict path, which accepts it (unknown event fields are fine)
    lines[3] = lines[3].replace(b'{"rec":"event",', b'{"rec":"event","vendor":1,', 1)
    p.write_bytes(b"".join(lines))
    assert _check_log_fast(str(p), 100) is None
    assert [f.code for f in validate_path(p).findings] == ["OT204"]


def test_validate_path_streams_a_clean_event_log_without_the_dict_path(tmp_path, monkeypatch):
    import orchestrace.core.validate as v

    tr = generate(seed=5, size=200, topology="hierarchical")
    p = tmp_path / "run.events.jsonl"
    ot.save(tr, p)

    def no_dicts(*a, **k):
        raise AssertionError("the dict path ran on a clean event log")

    monkeypatch.setattr(v, "iter_raw", no_dicts)
    r = v.validate_path(p)
    assert (r.valid, r.traces, r.findings) == (True, 1, [])


def test_event_log_records_decode_in_runs_but_one_per_line():
    """Runs of records are decoded in one call: a record split over two lines (whose joined
    text is valid JSON) or two records on one line must leave the fast path, as line by line."""
    from orchestrace.core.fastcheck import decode_records

    a, b, c, d = (
        {"rec": "event", "id": f"e{i}", "t": float(i), "type": "message", "agent": "x"} for i in range(4)
    )
    clean = [orjson.dumps(x) for x in (a, b, c, d)]
    assert [e.id for e in decode_records(clean, edge=False)] == ["e0", "e1", "e2", "e3"]
    opened = orjson.dumps(a | {"attrs": {"k": [{"x": 1}]}})[: -len(b"]}}")]  # ends inside the list
    two = orjson.dumps(c) + b"," + orjson.dumps(d)
    assert decode_records([two], edge=False) is None
    # together the record and object counts match: only the per-line lengths tell
    assert decode_records([opened, orjson.dumps(b) + b"]}}", two], edge=False) is None
    assert decode_records([orjson.dumps(c)[:-1] + b',"vendor":1}'], edge=False) is None  # a skipped key


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_written_files_get_the_mode_open_gives(tmp_path, umask, mode):
    """Outputs are written to a temporary file and renamed (atomic_output); they end with the
    mode a plain open() gives under the umask, like the files other tools write (mkstemp's 0600
    made every saved trace private)."""
    import os
    import stat

    tr = generate(seed=0, size=20, topology="centralized")
    old = os.umask(umask)
    try:
        paths = [tmp_path / f"t{ext}" for ext in (".json", ".jsonl.gz", ".events.jsonl")]
        for p in paths:
            ot.save(tr, p)
        with open(tmp_path / "plain.txt", "w") as f:
            f.write("x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "plain.txt").st_mode) == mode
    assert {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in paths} == {p.name: mode for p in paths}


def test_several_traces_to_a_name_that_is_not_jsonl_say_why_it_is_one_trace(tmp_path):
    # reward ... -o rewarded.txt said "a .json file holds exactly one trace" of a .txt file
    two = [generate(seed=s, size=10) for s in (1, 2)]
    with pytest.raises(LoadError, match=r"a \.json file holds exactly one trace, got 2: use \.jsonl"):
        ot.save(two, tmp_path / "a.json.gz")
    with pytest.raises(
        LoadError, match=r"one JSON trace \(the name does not end in \.jsonl\), got 2 traces"
    ) as ei:
        ot.save(two, tmp_path / "a.txt")
    assert ".json file" not in ei.value.message and ei.value.code == "OT112"


def test_an_output_that_is_a_folder_or_under_a_file_is_named(tmp_path):
    """reward/credit/view/gen -o FOLDER failed at the final rename, after all the work, and -o
    FILE/x.json at mkdir: internal errors (exit 3). Now OT001 before anything is computed."""
    tr = generate(seed=0, size=10)
    (tmp_path / "out").mkdir()
    with pytest.raises(LoadError, match="is a directory, expected a file to write") as e:
        ot.save(tr, tmp_path / "out")
    assert (e.value.code, e.value.exit_code, e.value.path) == ("OT001", 2, str(tmp_path / "out"))
    (tmp_path / "f").write_text("")
    with pytest.raises(LoadError, match="a folder on its path is a file") as e:
        ot.save(tr, tmp_path / "f" / "t.json")
    assert e.value.path == str(tmp_path / "f" / "t.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f", "out"]  # no .partial- file left


def test_a_negative_seed_is_refused():
    from orchestrace.core.errors import OrchestraceError

    with pytest.raises(OrchestraceError, match="the seed must be >= 0, got -5") as e:  # numpy's ValueError
        generate(seed=-5, size=10)
    assert e.value.code == "OT010"


def test_an_output_folder_that_is_a_file_is_named(tmp_path):
    """-o FOLDER on a file (eval team, report, parquet, bank traces, export --to samples, train/loop
    stop...) was FileExistsError or NotADirectoryError: internal errors (exit 3)."""
    from orchestrace.cli import main
    from orchestrace.core.paths import make_dirs

    (tmp_path / "f").write_text("")
    for path in (tmp_path / "f", tmp_path / "f" / "sub"):
        with pytest.raises(LoadError, match="it, or a folder on its path, is a file") as e:
            make_dirs(path)
        assert (e.value.code, e.value.path) == ("OT001", str(path))
    assert make_dirs(tmp_path / "a" / "b").is_dir()
    trace = tmp_path / "t.json"
    ot.save(generate(seed=0, size=10), trace)
    with pytest.raises(SystemExit) as e:
        main(["export", str(trace), "--to", "samples", "-o", str(tmp_path / "f")])
    assert e.value.code == 2


def test_an_otlp_export_onto_a_folder_or_failing_leaves_nothing(tmp_path):
    """export --to otlp -o FOLDER was IsADirectoryError at the rename (exit 3), and an export that
    failed (a span time out of range) left its .part file behind."""
    from orchestrace.export.otlp import export_otlp

    tr = generate(seed=0, size=10)
    (tmp_path / "out").mkdir()
    with pytest.raises(LoadError, match="is a directory, expected a file to write"):
        export_otlp([tr], str(tmp_path / "out"))
    with pytest.raises(BadInput):
        export_otlp([tr], str(tmp_path / "spans.json"), epoch=1e300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_transfer_report_onto_a_folder_is_named(tmp_path):
    from orchestrace.learn.stopping.transfer import TransferReport, write_transfer

    (tmp_path / "r.json").mkdir()  # IsADirectoryError at the rename, after the seven trainings
    with pytest.raises(LoadError, match="is a directory"):
        write_transfer(TransferReport("p", 8, 1, 0, [0.01], [0.01]), str(tmp_path / "r.json"))
