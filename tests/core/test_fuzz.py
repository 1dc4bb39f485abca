"""Fuzzing the loaders: whatever the bytes, validation returns findings and never raises."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrace.core.io import dumps, loads
from orchestrace.core.validate import validate_path, validate_trace
from orchestrace.gen import GEN_TOPOLOGIES, generate

EXAMPLE = orjson.loads(dumps(generate(seed=1, size=25)))
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4),
    max_leaves=12,
)


def _write(tmp: Path, name: str, data: bytes) -> Path:
    p = tmp / name
    p.write_bytes(data)
    return p


@SETTINGS
@given(
    data=st.binary(max_size=400),
    ext=st.sampled_from(["json", "jsonl", "events.jsonl", "json.gz", "json.zst"]),
)
def test_random_bytes(tmp_path_factory, data, ext):
    p = _write(tmp_path_factory.mktemp("f"), f"x.{ext}", data)
    r = validate_path(p)
    assert not r.valid or r.traces >= 1


@SETTINGS
@given(cut=st.integers(min_value=0, max_value=len(orjson.dumps(EXAMPLE)) - 1))
def test_every_truncation_is_caught(tmp_path_factory, cut):
    p = _write(tmp_path_factory.mktemp("f"), "x.json", orjson.dumps(EXAMPLE)[:cut])
    assert not validate_path(p).valid


@SETTINGS
@given(
    ev=st.integers(min_value=0, max_value=len(EXAMPLE["events"]) - 1),
    key=st.sampled_from(
        ["id", "t", "type", "agent", "to", "from", "t_end", "status", "tokens_in", "attrs", "call_id", "zz"]
    ),
    value=json_values,
)
def test_mutated_events_never_crash(ev, key, value):
    d = json.loads(json.dumps(EXAMPLE))
    d["events"][ev][key] = value
    validate_trace(d)  # findings or none; an exception here is a bug


@SETTINGS
@given(doc=json_values)
def test_arbitrary_json_documents(tmp_path_factory, doc):
    p = _write(tmp_path_factory.mktemp("f"), "x.json", orjson.dumps(doc))
    r = validate_path(p)
    assert not r.valid


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    size=st.integers(4, 300),
    top=st.sampled_from(GEN_TOPOLOGIES),
    width=st.integers(1, 6),
)
def test_generated_traces_validate_and_round_trip_byte_stable(seed, size, top, width):
    tr = generate(seed=seed, size=size, topology=top, width=width)
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    b = dumps(tr)
    assert dumps(loads(b)) == b
    assert dumps(generate(seed=seed, size=size, topology=top, width=width)) == b


def _dict_path_codes(doc) -> list[tuple[str, str | None]]:
    from orchestrace.core.read import RawTrace
    from orchestrace.core.validate import check_raw

    items, _ = check_raw(RawTrace(doc, "x"))
    return sorted((f.code, f.pointer) for f in items)


@SETTINGS
@given(
    ev=st.integers(min_value=0, max_value=len(EXAMPLE["events"]) - 1),
    key=st.sampled_from(
        [
            "id",
            "t",
            "type",
            "agent",
            "to",
            "from",
            "t_end",
            "status",
            "tokens_in",
            "credit",
            "call_id",
            "trusted",
        ]
    ),
    value=json_values,
)
def test_struct_fast_path_agrees_with_dict_path(tmp_path_factory, ev, key, value):
    """validate_path takes the msgspec struct path when it can; it must find exactly what the
    dict path finds, on clean and on broken traces alike."""
    d = json.loads(json.dumps(EXAMPLE))
    d["events"][ev][key] = value
    p = _write(tmp_path_factory.mktemp("f"), "x.json", orjson.dumps(d))
    got = sorted((f.code, f.pointer) for f in validate_path(p).findings)
    assert got == _dict_path_codes(d)


def test_struct_fast_path_is_taken_for_clean_traces():
    from orchestrace.core.fastcheck import columns, decode_clean

    for top in GEN_TOPOLOGIES:
        b = dumps(generate(seed=2, size=200, topology=top))
        tr = decode_clean(b)
        assert tr is not None and columns(tr) is not None, top
    assert decode_clean(b.replace(b'"trace_id":', b'"trace_id":"dup","trace_id":', 1)) is None
