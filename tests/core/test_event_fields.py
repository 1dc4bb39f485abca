"""One event field table: ``core.model.Event``. Every place that must know the fields either reads
``EVENT_FIELD_TYPES`` or is checked here against it, so a new field cannot be half-added."""

from __future__ import annotations

import json
from importlib import resources

import msgspec

from orchestrace.core import validate
from orchestrace.core.fastcheck import VEvent
from orchestrace.core.model import EVENT_FIELD_TYPES, EVENT_REQUIRED_FIELDS
from orchestrace.store.schema import EVENT_COLUMNS, TABLES


def test_the_published_schema_and_the_fast_path_list_the_model_fields():
    schema = json.loads(resources.files("orchestrace.core").joinpath("trace_schema.json").read_text())
    event = schema["$defs"]["event"]
    assert list(event["properties"]) == list(EVENT_FIELD_TYPES)
    assert set(event["required"]) == EVENT_REQUIRED_FIELDS == {"id", "t", "type", "agent"}
    assert [f.encode_name for f in msgspec.structs.fields(VEvent)] == list(EVENT_FIELD_TYPES)


def test_validation_checks_every_optional_field():
    assert set(validate._OPTIONAL_EVENT_FIELDS) == set(EVENT_FIELD_TYPES) - EVENT_REQUIRED_FIELDS


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
