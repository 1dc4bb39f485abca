"""Ingest's struct path (msgspec structs -> columns) stores exactly what the dict path stores.

A clean .json/.jsonl trace is decoded into validation's structs and its rows are pulled from
them; anything else (and, here, everything when ``decode_structs`` is patched out) takes the
dict path. The rows of a hand-made trace are written out below; the two paths must give them,
and the same tables and digests on generated traces and on awkward values.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import orjson
import pytest

from orchestrace.core.fastcheck import decode_clean
from orchestrace.core.io import dumps, save
from orchestrace.gen import generate_corpus
from orchestrace.store import ingest, rows
from orchestrace.store.rows import digest
from orchestrace.store.schema import TABLES

HAND = {
    "trace_id": "h1",
    "task_id": "t1",
    "system": "sys",
    "events": [
        {
            "id": "a",
            "t": 0,
            "t_end": 1.5,
            "type": "orchestrator_decision",
            "agent": "o",
            "role": "lead",
            "tokens_in": 10,
            "tokens_out": 2,
            "cost_usd": 1.5e-7,
            "model": "m1",
            "attrs": {"k": [1, "é"]},
        },
        {"id": "b", "t": 1.5, "type": "spawn", "agent": "o", "to": "w"},
        {
            "id": "c",
            "t": 2,
            "type": "message",
            "agent": "w",
            "from": "w",
            "to": "o",
            "content": "done: ok",
            "trusted": False,
            "turn": 3,
            "credit": {"team": 0.5, "w": 1},
        },
    ],
    "edges": [{"src": "a", "dst": "b", "type": "causal"}, {"src": "b", "dst": "c", "type": "spawn"}],
    "rewards": {"team": 1},
    "costs": {"tokens": 12, "wall_clock_s": 2.0},
    "metrics": {"m": 0.25},
    "metadata": {"t0_unix": 1700000000, "note": "x"},
}

# events columns: trace_id, idx, id, t, t_end, type, agent, role, from_agent, to_agent, tool,
# content_ref, trusted, parent, call_id, turn, tokens_in, tokens_out, cost_usd, model, content,
# status, attrs, extra, critical
HAND_EVENTS = [
    ("h1", 0, "a", 0.0, 1.5, "orchestrator_decision", "o", "lead", None, None, None, None, None, None, None, None, 10, 2, 1.5e-7, "m1", None, None, '{"k":[1,"é"]}', None, None),
    ("h1", 1, "b", 1.5, None, "spawn", "o", None, None, "w", None, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
    ("h1", 2, "c", 2.0, None, "message", "w", None, "w", "o", None, None, False, None, None, 3, None, None, None, None, "done: ok", None, None, None, None),
]  # fmt: skip
HAND_EDGES = [("h1", 0, "a", "b", "causal"), ("h1", 1, "b", "c", "spawn")]
HAND_CREDITS = [("h1", 2, "c", 0, "team", 0.5), ("h1", 2, "c", 1, "w", 1.0)]
HAND_REWARDS = [("h1", "team", 1.0)]
HAND_METRICS = [
    ("h1", "recorded", "m", 0.25),
    ("h1", "costs", "tokens", 12.0),
    ("h1", "costs", "wall_clock_s", 2.0),
]


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts of traces that took each path."""
    calls = {"structs": 0, "dicts": 0}
    for name, fn in (("structs", rows.add_struct_trace), ("dicts", rows.add_trace)):

        def counted(*a, _fn=fn, _name=name, **kw):  # type: ignore[no-untyped-def]
            calls[_name] += 1
            return _fn(*a, **kw)

        monkeypatch.setattr(rows, "add_struct_trace" if name == "structs" else "add_trace", counted)
    return calls


def _dict_path_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rows, "decode_structs", lambda data: None)


def _select(store: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(store), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _tables(store: Path) -> dict[str, list[tuple]]:
    """Every row of every table but the ingest time, sorted."""
    out = {}
    for name in TABLES:
        cols = "* EXCLUDE (ingested_at)" if name == "traces" else "*"
        out[name] = sorted(_select(store, f"SELECT {cols} FROM {name}"), key=repr)
    return out


@pytest.mark.parametrize("path", ["structs", "dicts"])
def test_hand_trace_rows_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    calls = _counting(monkeypatch)
    if path == "dicts":
        _dict_path_only(monkeypatch)
    f = tmp_path / "h.jsonl"
    line = orjson.dumps(HAND)
    f.write_bytes(line + b"\n")
    store = tmp_path / "s.duckdb"
    rep = ingest(str(store), [str(f)], measure=False)
    assert (rep.inserted, rep.events, rep.failed) == (1, 3, 0)
    assert calls == {"structs": int(path == "structs"), "dicts": int(path == "dicts")}
    assert _select(store, "SELECT * FROM events ORDER BY idx") == HAND_EVENTS
    assert _select(store, "SELECT * FROM edges ORDER BY idx") == HAND_EDGES
    assert _select(store, "SELECT * FROM credits ORDER BY ord") == HAND_CREDITS
    assert _select(store, "SELECT * FROM rewards") == HAND_REWARDS
    assert sorted(_select(store, "SELECT * FROM metrics")) == sorted(HAND_METRICS)
    header = (
        '{"task_id":"t1","system":"sys","rewards":{"team":1},"costs":{"tokens":12,"wall_clock_s":2.0},'
        '"metrics":{"m":0.25},"metadata":{"t0_unix":1700000000,"note":"x"}}'
    )
    assert _select(
        store,
        "SELECT trace_id, task_id, system, topology, schema_version, date, n_events, n_edges, "
        "digest, measured, source, header FROM traces",
    ) == [
        (
            "h1",
            "t1",
            "sys",
            None,
            None,
            dt.date(2023, 11, 14),  # t0_unix 1700000000 is 2023-11-14T22:13:20Z
            3,
            2,
            digest(orjson.loads(line)),
            False,
            str(f.resolve()),
            header,
        )
    ]


def _awkward() -> list[bytes]:
    """Traces whose values differ in how the two JSON libraries could write or read them."""
    base = orjson.loads(orjson.dumps(HAND))
    out = []
    for k, extra in enumerate(
        [
            {"metadata": {"small": 1.5e-7, "neg": -0.0, "uni": "é😀\u2028\x01", "n": [1, {"b": 2.5}]}},
            {"metadata": {"big": 1e20}},  # orjson writes 1e+20: this one takes the dict path
            {"rewards": {"team": 1e16, "z": -3}},
            {"metrics": {"a": 0.1, "b": 123456789.123456789}},
            {"schema_version": "orchestrace/1", "topology": "centralized"},
            {"task_id": "says 1e5, in a string"},  # looks like 1e+5 to the check: dict path too
        ]
    ):
        d = {**base, **extra, "trace_id": f"aw{k}"}
        out.append(orjson.dumps(d))
    out.append(b"\xef\xbb\xbf" + orjson.dumps({**base, "trace_id": "bom"}))
    return out


def _inputs(tmp_path: Path) -> list[str]:
    traces = generate_corpus(7, seed=5, size=40)
    save(traces[:5], tmp_path / "gen.jsonl")
    save(traces[5], tmp_path / "one.json")
    (tmp_path / "aw.jsonl").write_bytes(b"\n".join(_awkward()[:-1]) + b"\n")
    (tmp_path / "bom.json").write_bytes(_awkward()[-1])
    save(traces[6], tmp_path / "log.events.jsonl")  # event logs take the dict path (unchanged)
    return [str(tmp_path / n) for n in ("gen.jsonl", "one.json", "aw.jsonl", "bom.json", "log.events.jsonl")]


def test_both_paths_store_the_same_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _inputs(tmp_path)
    calls = _counting(monkeypatch)
    fast = tmp_path / "fast.duckdb"
    rep = ingest(str(fast), files)
    assert rep.failed == 0 and rep.inserted == 14 and rep.duplicates == 0
    # generated 6 + 3 hand-like + the BOM one; 1e20, 1e16 (positive exponents), "1e5," and the log: dicts
    assert calls == {"structs": 10, "dicts": 4}
    _dict_path_only(monkeypatch)
    slow = tmp_path / "slow.duckdb"
    assert ingest(str(slow), files).inserted == 14
    assert calls == {"structs": 10, "dicts": 18}
    assert _tables(fast) == _tables(slow)  # digests, measure metrics and critical flags included


def test_store_of_the_dict_path_is_unchanged_for_the_struct_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stores written before the struct path existed: its digests are theirs, nothing is rewritten."""
    files = _inputs(tmp_path)
    store = tmp_path / "s.duckdb"
    with monkeypatch.context() as m:
        _dict_path_only(m)
        ingest(str(store), files)
    rep = ingest(str(store), files)
    assert (rep.inserted, rep.replaced, rep.unchanged) == (0, 0, 14)


def test_struct_path_digest_is_the_dict_digest() -> None:
    for line in _awkward():
        text = line.removeprefix(b"\xef\xbb\xbf")
        tr = decode_clean(text)
        assert tr is not None
        canonical = rows._SORTED.encode(tr)
        if not rows._POS_EXPONENT.search(canonical):  # the others take the dict path
            assert canonical == orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS)


def test_invalid_clean_struct_trace_reports_the_dict_findings(tmp_path: Path) -> None:
    """A trace that decodes into structs but breaks a rule is reported as the dict path does."""
    bad = {**HAND, "edges": [{"src": "c", "dst": "a", "type": "causal"}]}  # backwards in time
    f = tmp_path / "b.jsonl"
    f.write_bytes(dumps_line(bad))
    rep = ingest(str(tmp_path / "s.duckdb"), [str(f)], measure=False)
    assert rep.inserted == 0 and [(x.line, x.first().code, x.first().pointer) for x in rep.failures] == [
        (1, "OT204", "/edges/0")
    ]


def dumps_line(d: dict) -> bytes:
    return orjson.dumps(d) + b"\n"


def test_saved_trace_bytes_take_the_struct_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    tr = generate_corpus(1, seed=9, size=30)[0]
    (tmp_path / "x.json").write_bytes(dumps(tr))
    ingest(str(tmp_path / "s.duckdb"), [str(tmp_path / "x.json")], measure=False)
    assert calls == {"structs": 1, "dicts": 0}


def test_columns_null_until_late_keep_their_values(tmp_path: Path) -> None:
    """DuckDB types a column of Python objects from a sample of its first rows: values that
    appear only after 1,500 empty rows, up to 2**62, are still stored exactly."""
    events = []
    for i in range(2000):
        e = {"id": f"e{i}", "t": i, "type": "orchestrator_decision", "agent": "o"}
        if i >= 1500:
            e |= {"model": "m", "tokens_in": 2**62 if i == 1999 else i, "trusted": True, "cost_usd": 0.5}
            e["turn"] = i
        events.append(e)
    tr = {**HAND, "events": events, "edges": [], "rewards": {}}
    f = tmp_path / "late.json"
    f.write_bytes(orjson.dumps(tr))
    store = tmp_path / "s.duckdb"
    assert ingest(str(store), [str(f)], measure=False).inserted == 1
    assert _select(
        store,
        "SELECT count(model), min(tokens_in), max(tokens_in), count(trusted), sum(cost_usd), "
        "sum(turn), count(t_end) FROM events",
    ) == [(500, 1500, 2**62, 500, 250.0, sum(range(1500, 2000)), 0)]


def test_integer_and_boolean_columns_with_gaps(tmp_path: Path) -> None:
    """An integer or boolean column with gaps (a masked array), with none, and with no value at
    all (all masked) holds each trace's values and NULLs."""

    def trace(tid: str, tokens: list[int | None]) -> bytes:
        events = [
            {"id": f"e{i}", "t": i, "type": "orchestrator_decision", "agent": "o"}
            | ({} if v is None else {"tokens_in": v, "trusted": v % 2 == 0})
            for i, v in enumerate(tokens)
        ]
        return orjson.dumps({**HAND, "trace_id": tid, "events": events, "edges": [], "rewards": {}})

    files = []
    for name, tokens in (("gaps", [1, None, 3]), ("full", [4, 5]), ("none", [None, None])):
        f = tmp_path / f"{name}.json"
        f.write_bytes(trace(name, tokens))
        files.append(str(f))
    store = tmp_path / "s.duckdb"
    assert ingest(str(store), files, measure=False).inserted == 3
    assert _select(store, "SELECT trace_id, idx, tokens_in, trusted FROM events ORDER BY trace_id, idx") == [
        ("full", 0, 4, True),
        ("full", 1, 5, False),
        ("gaps", 0, 1, False),
        ("gaps", 1, None, None),
        ("gaps", 2, 3, False),
        ("none", 0, None, None),
        ("none", 1, None, None),
    ]
