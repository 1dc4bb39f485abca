"""Loading through structs (core.fastload) gives the trace the dict path gives, byte for byte,
and hands anything unusual to the dict path, which reports it as before."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

import orchestrace as ot
from orchestrace.core import limits
from orchestrace.core.errors import InvalidTrace
from orchestrace.core.fastload import load_clean
from orchestrace.core.io import dumps, save
from orchestrace.core.read import iter_raw, raw_to_trace
from orchestrace.core.validate import validate_path
from orchestrace.gen import generate

# ints stay ints and floats floats (t, t_end, cost_usd, credit, rewards, costs, metrics),
# every optional field once, unicode and escapes in strings, nulls inside attrs and metadata
MIXED = {
    "schema_version": "orchestrace/1",
    "trace_id": "t-1",
    "task_id": "k",
    "system": "s",
    "topology": "debate",
    "events": [
        {
            "id": "a",
            "t": 0,
            "type": "orchestrator_decision",
            "agent": "lead",
            "role": "lead",
            "t_end": 1,
            "turn": 0,
            "tokens_in": 3,
            "tokens_out": 4,
            "cost_usd": 0,
            "model": "m",
            "attrs": {"x": [1, 2.0, {"y": None}], "ü": "é\u2028"},
            "credit": {"lead": 1, "w": 0.5},
        },
        {
            "id": "b",
            "t": 1.5,
            "type": "spawn",
            "agent": "lead",
            "to": "w",
            "parent": "lead",
            "content": 'a "b"\n',
        },
        {
            "id": "c",
            "t": 2,
            "type": "tool_call",
            "agent": "w",
            "tool": "kv",
            "call_id": "c1",
            "content_ref": "h:1",
        },
        {
            "id": "d",
            "t": 2.25,
            "type": "tool_result",
            "agent": "w",
            "tool": "kv",
            "call_id": "c1",
            "trusted": False,
        },
        {"id": "e", "t": 3, "type": "return", "agent": "w", "from": "w", "to": "lead", "status": "error"},
    ],
    "edges": [
        {"src": "a", "dst": "b", "type": "causal"},
        {"src": "b", "dst": "c", "type": "spawn"},
        {"src": "c", "dst": "d", "type": "tool_dependency"},
    ],
    "rewards": {"team": 1, "x": -0.5},
    "costs": {"tokens": 7, "wall_clock_s": 3, "usd": 0.0},
    "metrics": {"task_success": 1},
    "metadata": {"n": 1, "f": 1.0, "none": None, "d": {}},
}


def _log_lines(doc: dict) -> bytes:
    header = {"rec": "header", **{k: v for k, v in doc.items() if k not in ("events", "edges", "costs")}}
    recs = [
        header,
        *({"rec": "event", **e} for e in doc["events"]),
        *({"rec": "edge", **x} for x in doc["edges"]),
    ]
    recs.append({"rec": "update", "rewards": {"late": 2}, "metadata": {"m": 3}})
    return b"".join(orjson.dumps(r) + b"\n" for r in recs)


def _dict_path(p: Path) -> bytes:
    (raw,) = iter_raw(p)
    return dumps(raw_to_trace(raw))


def _files(tmp_path: Path) -> list[Path]:
    out = []
    for topo in ("centralized", "debate", "hierarchical"):
        tr = generate(seed=3, size=400, topology=topo)
        for ext in ("json", "events.jsonl", "json.gz"):
            out.append(tmp_path / f"{topo}.{ext}")
            save(tr, out[-1])
    (tmp_path / "mixed.json").write_bytes(orjson.dumps(MIXED))
    (tmp_path / "mixed.events.jsonl").write_bytes(_log_lines(MIXED))  # costs derived from events
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + orjson.dumps(MIXED, option=orjson.OPT_INDENT_2))
    with gzip.open(tmp_path / "mixed.events.jsonl.gz", "wb") as f:
        f.write(_log_lines(MIXED))
    return [
        *out,
        *(tmp_path / n for n in ("mixed.json", "mixed.events.jsonl", "bom.json", "mixed.events.jsonl.gz")),
    ]


def test_struct_path_loads_what_the_dict_path_loads(tmp_path):
    for p in _files(tmp_path):
        tr = load_clean(str(p))
        assert tr is not None, p
        assert dumps(tr) == _dict_path(p), p
        assert ot.load_one(p) == tr


def test_repeated_names_and_edge_ends_share_one_string(tmp_path):
    p = tmp_path / "t.json"
    save(generate(seed=1, size=300, topology="centralized"), p)
    tr = load_clean(str(p))
    by_id = {e.id: e for e in tr.events}
    assert all(by_id[x.src].id is x.src and by_id[x.dst].id is x.dst for x in tr.edges)
    agents = {}
    assert all(agents.setdefault(e.agent, e.agent) is e.agent for e in tr.events)


def _variant(change) -> dict:
    doc = orjson.loads(orjson.dumps(MIXED))
    change(doc)
    return doc


# inputs the struct path leaves to the dict path: (name, document, error code or None if valid)
UNUSUAL = [
    ("unknown_event_field", _variant(lambda d: d["events"][0].update(extra_field=1)), None),
    ("explicit_null", _variant(lambda d: d["events"][0].update(role=None)), "OT102"),
    ("negative_t", _variant(lambda d: d["events"][1].update(t=-1)), "OT107"),
    ("duplicate_id", _variant(lambda d: d["events"][1].update(id="a")), "OT201"),
    (
        "dangling_edge",
        _variant(lambda d: d["edges"].append({"src": "a", "dst": "zz", "type": "causal"})),
        "OT202",
    ),
    (
        "backwards_edge",
        _variant(lambda d: d["edges"].append({"src": "e", "dst": "a", "type": "causal"})),
        "OT204",
    ),
    ("return_to_stranger", _variant(lambda d: d["events"][4].update(to="nobody")), "OT206"),
]


@pytest.mark.parametrize(("name", "doc", "code"), UNUSUAL, ids=[u[0] for u in UNUSUAL])
def test_unusual_input_goes_to_the_dict_path(tmp_path, name, doc, code):
    for p, text in ((tmp_path / "t.json", orjson.dumps(doc)), (tmp_path / "t.events.jsonl", _log_lines(doc))):
        p.write_bytes(text)
        assert load_clean(str(p)) is None, p
        if code is None:
            assert dumps(ot.load_one(p)) == _dict_path(p)
            continue
        with pytest.raises(InvalidTrace) as e:
            ot.load_one(p)
        assert code in {f.code for f in e.value.findings}
        assert all(f.path == str(p) and f.pointer is not None for f in e.value.findings if f.code == code)


def test_duplicate_key_goes_to_the_dict_path(tmp_path):
    p = tmp_path / "dup.json"
    text = orjson.dumps(MIXED).replace(b'"role":"lead"', b'"role":"lead","role":"x"', 1)
    p.write_bytes(text)
    assert load_clean(str(p)) is None
    with pytest.raises(InvalidTrace) as e:
        ot.load_one(p)
    assert [f.pointer for f in e.value.findings if f.code == "OT005"] == ["/events/0"]


def test_long_string_test_needs_a_long_stretch_without_an_unescaped_quote(monkeypatch):
    monkeypatch.setattr(limits, "MAX_STRING_CHARS", 10)
    assert not limits.may_hold_long_string(b'["' + b'xxxx","' * 10 + b'"]')
    assert not limits.may_hold_long_string(b'["x",' + b" " * 2 + b'"y"]' * 5)
    assert limits.may_hold_long_string(b'{"a":"' + b"x" * 11 + b'"}')
    assert limits.may_hold_long_string(b'{"a":"' + b'x\\"' * 6 + b'"}')  # escaped quotes do not split it
    assert limits.may_hold_long_string(b'{"a":"' + b"x" * 11 + b'","b":"' + b"x" * 30 + b'"}')


def test_string_past_the_limit_is_found_by_load_and_validate(tmp_path):
    doc = orjson.loads(orjson.dumps(MIXED))
    doc["events"][1]["content"] = "x" * limits.MAX_STRING_CHARS + '"'
    p = tmp_path / "long.json"
    p.write_bytes(orjson.dumps(doc))
    del doc
    assert load_clean(str(p)) is None
    with pytest.raises(InvalidTrace) as e:
        ot.load_one(p)
    assert [(f.code, f.pointer) for f in e.value.findings] == [("OT008", "/events/1/content")]
    r = validate_path(p)
    assert [(f.code, f.pointer) for f in r.findings] == [("OT008", "/events/1/content")]


def test_stdin_is_read_once_by_the_path_that_reports(tmp_path):
    def analyze(doc: dict) -> subprocess.CompletedProcess[bytes]:
        cmd = [sys.executable, "-m", "orchestrace", "analyze", "-", "--format", "json"]
        return subprocess.run(cmd, input=orjson.dumps(doc), capture_output=True, timeout=120)

    bad = analyze(next(doc for name, doc, _ in UNUSUAL if name == "negative_t"))
    assert bad.returncode == 1 and b"internal error" not in bad.stderr, bad.stderr
    assert [f["code"] for f in orjson.loads(bad.stdout)["failed"]] == ["OT107"]
    good = analyze(MIXED)
    assert good.returncode == 0, good.stderr
    assert [t["trace_id"] for t in orjson.loads(good.stdout)["traces"]] == ["t-1"]
