"""Compatibility with the published minimal schema, both ways."""

from __future__ import annotations

import json

import jsonschema
import orjson

import orchestrace as ot
from orchestrace.core.io import dumps, loads
from orchestrace.core.schema import trace_schema
from orchestrace.core.validate import validate_path
from orchestrace.export.survey import to_survey
from orchestrace.gen import GEN_TOPOLOGIES, generate


def test_reference_example_validates(reference_example):
    r = validate_path(reference_example)
    assert r.valid, r.findings
    assert r.findings == []


def test_reference_example_round_trips_every_field(reference_example, tmp_path):
    original = json.loads(reference_example.read_text())
    tr = ot.load_one(reference_example)
    assert orjson.loads(dumps(tr)) == original
    for name in ("a.json", "a.jsonl", "a.events.jsonl", "a.json.gz", "a.jsonl.zst", "a.events.jsonl.gz"):
        ot.save(tr, tmp_path / name)
        assert orjson.loads(dumps(ot.load_one(tmp_path / name))) == original, name


def test_unknown_event_fields_survive(reference_example):
    d = json.loads(reference_example.read_text())
    d["events"][0]["vendor_x"] = {"nested": [1, 2]}
    d["events"][1]["weird-key"] = None
    tr = loads(json.dumps(d))
    assert tr.events[0].extra == {"vendor_x": {"nested": [1, 2]}}
    assert orjson.loads(dumps(tr)) == d


def test_our_schema_accepts_reference_example(reference_example):
    ours = trace_schema()
    jsonschema.Draft202012Validator.check_schema(ours)
    jsonschema.validate(json.loads(reference_example.read_text()), ours)


def test_generated_traces_valid_under_our_schema():
    v = jsonschema.Draft202012Validator(trace_schema())
    for i, top in enumerate(GEN_TOPOLOGIES):
        errors = list(v.iter_errors(orjson.loads(dumps(generate(seed=i, size=60, topology=top)))))
        assert errors == [], (top, errors[:2])


def test_survey_export_is_strictly_valid_under_reference(reference_schema):
    v = jsonschema.Draft202012Validator(reference_schema)
    for i, top in enumerate(GEN_TOPOLOGIES):
        tr = generate(seed=i, size=50, topology=top)
        tr.metadata = {"source": "test"}
        warned: list[str] = []
        out = orjson.loads(dumps(to_survey(tr, warned.append)))
        assert list(v.iter_errors(out)) == []
        assert warned and "metadata" in warned[0]
        assert "schema_version" in orjson.loads(dumps(tr)) and "schema_version" not in out


def test_survey_export_cli(tmp_path, reference_schema):
    from orchestrace.cli import main

    src = tmp_path / "c.jsonl"
    ot.save([generate(seed=s, size=30) for s in range(3)], src)
    out = tmp_path / "c.survey.jsonl"
    try:
        main(["export", str(src), "--to", "survey", "-o", str(out)])
    except SystemExit as e:
        assert e.code in (0, None)
    lines = out.read_text().splitlines()
    assert len(lines) == 3
    v = jsonschema.Draft202012Validator(reference_schema)
    for line in lines:
        assert list(v.iter_errors(json.loads(line))) == []


def test_vendored_reference_matches_shared(data, reference_example):
    """tests/data/reference/ is a verbatim copy of shared/reference/ (CI has both)."""
    shared = data.parent / "reference"
    for name in ("example_trace.json", "trace_schema.json"):
        assert (shared / name).read_bytes() == (reference_example.parent / name).read_bytes(), name
