"""One event field table: ``core.model.Event``. Validation's per-field rules, its struct fast path
the store's columns and the printed JSON Schema are made from it; the rules' findings and the
schema are checked here against values written out by hand."""

from __future__ import annotations

import json

import jsonschema
import orjson
import pytest

from orchestrace.core.fastcheck import decode_clean
from orchestrace.core.fastload import to_events
from orchestrace.core.model import EVENT_FIELD_TYPES, EVENT_REQUIRED_FIELDS, event_to_dict
from orchestrace.core.schema import schema_text
from orchestrace.core.validate import validate_json
from orchestrace.store.schema import EVENT_COLUMNS, TABLES


def test_the_printed_schema_says_what_validation_checks():
    schema = json.loads(schema_text())
    event = schema["$defs"]["event"]
    assert list(event["properties"]) == [
        "id", "t", "type", "agent", "role", "from", "to", "tool", "content_ref", "trusted",  # the survey's
        "t_end", "parent", "call_id", "turn", "tokens_in", "tokens_out", "cost_usd", "model", "content",
        "status", "attrs", "credit",
    ]  # fmt: skip
    assert event["required"] == ["id", "t", "type", "agent"]
    props = event["properties"]
    assert props["tokens_in"] == {"type": "integer", "minimum": 0}
    assert props["cost_usd"] == {"type": "number", "minimum": 0}
    assert props["status"] == {"type": "string", "enum": ["ok", "error"]}
    assert props["credit"]["additionalProperties"] == {"type": "number"}
    assert props["t_end"]["description"] == "end time, seconds from trace start (>= t)"
    assert schema["$defs"]["edge"]["additionalProperties"] is False
    assert schema["properties"]["costs"]["required"] == ["tokens", "wall_clock_s"]
    # a negative cost under any key: refused by the schema and by validation alike
    bad = orjson.loads(_trace())
    bad["costs"]["usd"] = -1
    assert not jsonschema.Draft202012Validator(schema).is_valid(bad)
    assert [f.code for f in validate_json(orjson.dumps(bad))] == ["OT107"]


def _trace(**fields: object) -> bytes:
    event = {"id": "e0", "t": 0, "type": "message", "agent": "a", **fields}
    costs = {"tokens": 0, "wall_clock_s": 0}
    return orjson.dumps(
        {"trace_id": "t", "task_id": "k", "events": [event], "edges": [], "rewards": {}, "costs": costs}
    )


# validation's per-field rules and the fast path's struct are made from model.Event's annotations:
# each optional field's bad value, with the finding written out by hand
BAD_VALUES = [
    ("from", 1, "OT102", "from must be a string, got number 1"),
    ("trusted", "yes", "OT102", "trusted must be a boolean, got string 'yes'"),
    (
        "t_end",
        "soon",
        "OT102",
        "t_end must be a finite number >= 0 (seconds from trace start), got string 'soon'",
    ),
    ("parent", 3, "OT102", "parent must be a string (the spawning agent), got number 3"),
    ("turn", -1, "OT102", "turn must be an integer from 0 to 2**63 - 1, got number -1"),
    ("tokens_in", -1, "OT107", "tokens_in must be an integer from 0 to 2**63 - 1, got number -1"),
    ("tokens_out", 1.5, "OT107", "tokens_out must be an integer from 0 to 2**63 - 1, got number 1.5"),
    ("cost_usd", -0.5, "OT107", "cost_usd must be a finite number >= 0, got number -0.5"),
    ("status", "failed", "OT104", 'status must be one of "ok", "error", got string \'failed\''),
    ("attrs", [], "OT102", "attrs must be an object, got array []"),
    ("credit", {"a": "x"}, "OT102", "credit must be an object of finite numbers, got object {'a': 'x'}"),
]


@pytest.mark.parametrize(("field", "value", "code", "message"), BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_a_bad_field_value_is_refused_by_the_fast_path_and_named_by_validation(field, value, code, message):
    data = _trace(**{field: value})
    assert decode_clean(data) is None  # the struct path hands it to the dict path
    assert [(f.code, f.message, f.pointer) for f in validate_json(data)] == [
        (code, message, f"/events/0/{field}")
    ]


def test_good_values_of_every_optional_field_take_the_fast_path():
    good = {
        "role": "r", "from": "a", "to": "a", "tool": "x", "content_ref": "sha256:0", "trusted": True, "t_end": 1,
        "parent": "p", "call_id": "c", "turn": 2, "tokens_in": 3, "tokens_out": 4, "cost_usd": 0.5, "model": "m",
        "content": "hi", "status": "error", "attrs": {"k": []}, "credit": {"a": 1},
    }  # fmt: skip
    assert set(good) == set(EVENT_FIELD_TYPES) - EVENT_REQUIRED_FIELDS
    data = _trace(**good)
    tr = decode_clean(data)
    assert tr is not None and validate_json(data) == []
    assert {k: tr.events[0].get(k) for k in good} == good
    # and loading keeps every one of them (fastload converts the structs field by field)
    (event,) = to_events(tr.events)
    assert event_to_dict(event) == {"id": "e0", "t": 0, "type": "message", "agent": "a", **good}


def test_the_store_has_a_column_for_every_scalar_field():
    # attrs is kept as JSON, credit in its own table; 'from' and 'to' are SQL keywords
    assert set(EVENT_COLUMNS) == set(EVENT_FIELD_TYPES) - {"attrs", "credit"}
    assert EVENT_COLUMNS["from"] == "from_agent" and EVENT_COLUMNS["to"] == "to_agent"
    cols = dict(TABLES["events"])
    assert (cols["t_end"], cols["turn"], cols["trusted"], cols["model"]) == (
        "DOUBLE",
        "BIGINT",
        "BOOLEAN",
        "VARCHAR",
    )
    assert [c for c, _ in TABLES["events"]][:5] == [
        "trace_id",
        "idx",
        "id",
        "t",
        "t_end",
    ]  # stores written so far


def test_loading_keeps_one_string_per_repeated_name():
    events = [
        {"id": f"e{i}", "t": i, "type": "tool_call", "agent": "worker", "tool": "search"} for i in range(2)
    ]
    data = orjson.dumps(
        {
            "trace_id": "t",
            "task_id": "k",
            "events": events,
            "edges": [],
            "rewards": {},
            "costs": {"tokens": 0, "wall_clock_s": 1},
        }
    )
    tr = decode_clean(data)
    assert tr is not None
    a, b = to_events(tr.events)
    assert a.agent is b.agent and a.tool is b.tool  # names: one string, however many events name it
