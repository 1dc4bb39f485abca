"""orchestrace's JSON Schema (draft 2020-12), written out from the structs that validation decodes
into: the event from ``model.Event``, the trace and edge from ``fastcheck``. A field added there
appears here; nothing else lists the fields.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, UnsetType

from .fastcheck import VEdge, VEvent, VTrace
from .model import Event

_HEAD = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://orchestrace.dev/schema/trace/1.json",
    "title": "orchestrace orchestration trace (superset of the LLM-MAS reference schema)",
    "description": "Every trace valid under the published minimal schema is valid here. Times t/t_end are "
    "seconds from the trace start. Extensions are optional. Semantic rules (unique ids, acyclic edges, "
    "time order, agent lifecycle, tool call/result pairing) are checked by `orchestrace validate`, not by "
    "this schema.",
}
_REFS = {VEvent: "#/$defs/event", VEdge: "#/$defs/edge"}
_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number"}
#: The order keys are printed in, so the document reads the same however it is assembled.
_KEY_ORDER = {
    k: i
    for i, k in enumerate(
        (
            "$schema",
            "$id",
            "title",
            "type",
            "enum",
            "minLength",
            "minimum",
            "minItems",
            "required",
            "additionalProperties",
            "items",
            "properties",
            "$defs",
            "description",
        )
    )
}


def trace_schema() -> dict[str, Any]:
    """The schema of one trace: a superset of the published minimal schema."""
    event = _object(Event, [f for f in msgspec.structs.fields(Event) if f.name != "extra"])
    return _ordered(
        {
            **_HEAD,
            **_object(VTrace, msgspec.structs.fields(VTrace)),
            "$defs": {"event": event, "edge": _object(VEdge, msgspec.structs.fields(VEdge))},
        }
    )


def schema_text() -> str:
    """``trace_schema()`` as ``orchestrace schema`` prints it."""
    return json.dumps(trace_schema(), indent=2) + "\n"


def _object(struct: Any, fields: Sequence[msgspec.structs.FieldInfo]) -> dict[str, Any]:
    """An object of ``fields`` (in that order), open to other keys unless ``struct`` refuses them."""
    return {
        "type": "object",
        "required": [f.encode_name for f in fields if f.required],
        "additionalProperties": not struct.__struct_config__.forbid_unknown_fields,
        "properties": {f.encode_name: _ordered(_value(f.type)) for f in fields},
    }


def _value(annotation: Any) -> dict[str, Any]:
    """The schema of one value, from its annotation (absent = not set, so None and UNSET drop)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a not in (type(None), UnsetType)]
        if len(kinds) > 1:  # int | float: a JSON number of either kind, with the bounds both have
            first, *others = [_value(k) | {"type": "number"} for k in kinds]
            if any(o != first for o in others):
                raise TypeError(f"no JSON Schema for {annotation}: its kinds differ in more than int/float")
            return first
        (annotation,) = kinds
    meta, extra = Meta(), {}
    if typing.get_origin(annotation) is Annotated:
        annotation, meta = typing.get_args(annotation)[:2]
        extra = meta.extra_json_schema or {}
    out: dict[str, Any]
    origin = typing.get_origin(annotation)
    if origin is Literal:
        out = {"type": "string", "enum": list(typing.get_args(annotation))}
    elif origin is list:
        (item,) = typing.get_args(annotation)
        out = {"type": "array", "items": {"$ref": _REFS[item]}}
    elif origin is dict:
        out = {"type": "object"}
        if (values := typing.get_args(annotation)[1]) is not Any:
            out["additionalProperties"] = _value(values)
    else:
        out = {"type": _JSON_TYPES[annotation]}
    if meta.min_length is not None:
        out["minItems" if origin is list else "minLength"] = meta.min_length
    if meta.ge is not None:
        out["minimum"] = meta.ge
    return out | extra


def _ordered(d: dict[str, Any]) -> dict[str, Any]:
    return dict(sorted(d.items(), key=lambda kv: _KEY_ORDER[kv[0]]))
