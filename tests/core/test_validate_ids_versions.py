"""Issue 34, left open from the round before: a trace id met twice in one JSONL file, and a
schema_version this orchestrace does not know, each get a finding from validate."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load
from orchestrace.core.validate import validate_path
from orchestrace.gen import generate
from orchestrace.store import ingest


def _trace() -> dict:
    from orchestrace.core.io import dumps

    return orjson.loads(dumps(generate(seed=3, size=8)))


@pytest.mark.parametrize(
    ("second", "code"),
    [
        (lambda tr: tr, "OT216"),  # a byte-identical repeat
        (lambda tr: dict(reversed(list(tr.items()))), "OT216"),  # the same content, keys reordered
        (lambda tr: {**tr, "task_id": "another"}, "OT215"),  # the same id, other content
    ],
)
def test_a_trace_id_twice_in_one_file_is_a_finding(tmp_path: Path, second, code: str) -> None:
    """validate said nothing, while ingest refuses a second trace of one id with other content
    (OT310) and stores an identical one once. A warning either way: load, stats and analyze
    read both traces, and validate's verdict is theirs."""
    tr = _trace()
    other = {**tr, "trace_id": "other"}
    f = tmp_path / "t.jsonl"
    f.write_bytes(b"\n".join(orjson.dumps(d) for d in (tr, other, second(tr))) + b"\n")
    r = validate_path(f)
    assert r.valid and [(x.code, x.severity, x.line, x.pointer) for x in r.findings] == [
        (code, "warning", 3, "/trace_id")
    ]
    assert "line 1" in r.findings[0].message
    assert len(load(f)) == 3
    rep = ingest(str(tmp_path / "s.duckdb"), [str(f)], on_error="skip")
    assert rep.failed == (code == "OT215")


def test_distinct_ids_give_no_finding(tmp_path: Path) -> None:
    tr = _trace()
    f = tmp_path / "t.jsonl"
    f.write_bytes(b"\n".join(orjson.dumps({**tr, "trace_id": f"t{k}"}) for k in range(3)) + b"\n")
    assert validate_path(f).findings == []


@pytest.mark.parametrize("fmt", ["json", "jsonl", "events.jsonl"])
@pytest.mark.parametrize("version", ["orchestrace/2", "1", "otel/1"])
def test_an_unknown_schema_version_is_an_error(tmp_path: Path, fmt: str, version: str) -> None:
    """It was accepted silently: a trace of another schema read as this one. Now OT104 at
    /schema_version, for validate and load alike."""
    tr = {**_trace(), "schema_version": version}
    f = tmp_path / f"t.{fmt}"
    if fmt == "events.jsonl":
        head = {"rec": "header", **{k: v for k, v in tr.items() if k not in ("events", "edges")}}
        recs = [
            head,
            *({"rec": "event", **e} for e in tr["events"]),
            *({"rec": "edge", **x} for x in tr["edges"]),
        ]
        f.write_bytes(b"\n".join(orjson.dumps(r) for r in recs) + b"\n")
    else:
        f.write_bytes(orjson.dumps(tr) + b"\n")
    r = validate_path(f)
    assert not r.valid
    assert [(x.code, x.pointer) for x in r.findings] == [("OT104", "/schema_version")]
    assert "orchestrace/1" in r.findings[0].message
    with pytest.raises(OrchestraceError, match="schema_version"):
        load(f)
