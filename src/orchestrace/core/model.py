"""The orchestration trace: typed, plain data.

A trace is a temporal event graph (survey Def. 3): events are vertices, edges are typed
dependencies. Field names follow the published minimal schema; everything we add is optional,
so every trace valid under that schema is a valid orchestrace trace.

Time convention (ours, spec §1.2 leaves it open): ``t`` and ``t_end`` are seconds from the trace
start. Traces whose ``t`` is ordinal (0, 1, 2, ...) remain valid; wall-clock metrics then read
steps as seconds.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

SCHEMA_VERSION: Final = "orchestrace/1"

EVENT_TYPES: Final = (
    "orchestrator_decision",
    "spawn",
    "despawn",
    "message",
    "tool_call",
    "tool_result",
    "return",
    "aggregate",
    "human_intervention",
    "safety_event",
)
EDGE_TYPES: Final = (
    "temporal",
    "causal",
    "spawn",
    "message",
    "tool_dependency",
    "return",
    "aggregate",
    "safety_flow",
)
TOPOLOGIES: Final = (
    "centralized",
    "planner_executor_critic",
    "debate",
    "swarm",
    "hierarchical",
    "harness",
    "mixed",
    "unknown",
)
STATUSES: Final = ("ok", "error")
#: The costs every trace carries (others are free: usd, tool_calls, messages, ...).
REQUIRED_COSTS: Final = ("tokens", "wall_clock_s")

#: Event fields of the published schema, in its order.
SURVEY_EVENT_FIELDS: Final = (
    "id",
    "t",
    "type",
    "agent",
    "role",
    "from",
    "to",
    "tool",
    "content_ref",
    "trusted",
)


#: A count or amount that adds up into the trace's costs (tokens, USD): >= 0, and a value that is
#: not is finding OT107 (the other fields' wrong values are OT102).
_COST = Meta(ge=0, extra={"finding": "OT107"})


def described(text: str, **bounds: Any) -> Meta:
    """A field's bounds and the words ``orchestrace schema`` prints for it (``description``
    itself is what validation's messages add in parentheses)."""
    return Meta(**bounds, extra_json_schema={"description": text})


class Event(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One vertex of the trace. ``extra`` holds fields we do not know, kept verbatim on save.

    The field table of events: the annotations say what each value must be (``Meta`` bounds and
    descriptions, ``Literal`` choices), and validation, its struct fast path and the store read
    them from here, and so does the JSON Schema ``orchestrace schema`` prints (``core.schema``).
    Nothing checks them when an Event is made in Python."""

    id: Annotated[str, Meta(min_length=1)]
    t: Annotated[float, described("start time, seconds from trace start", ge=0)]
    type: Literal[EVENT_TYPES]  # type: ignore[valid-type]
    agent: Annotated[str, Meta(min_length=1)]
    role: str | None = None
    from_: str | None = msgspec.field(default=None, name="from")
    to: str | None = None
    tool: str | None = None
    content_ref: (
        Annotated[
            str, described("Pointer or hash for text/tool content; raw content can be omitted for privacy.")
        ]
        | None
    ) = None
    trusted: bool | None = None
    # --- orchestrace extensions (all optional) ---
    t_end: (
        Annotated[
            float,
            described(
                "end time, seconds from trace start (>= t)", ge=0, description="seconds from trace start"
            ),
        ]
        | None
    ) = None
    parent: (
        Annotated[str, described("the agent that spawned `agent`", description="the spawning agent")] | None
    ) = None
    call_id: Annotated[str, described("pairs a tool_result with its tool_call")] | None = None
    turn: (
        Annotated[int, described("round/turn index of the acting agent (credit unit 'turn')", ge=0)] | None
    ) = None
    tokens_in: Annotated[int, _COST] | None = None
    tokens_out: Annotated[int, _COST] | None = None
    cost_usd: Annotated[float, _COST] | None = None
    model: str | None = None
    content: Annotated[str, described("inline content, only when the user asked to keep it")] | None = None
    status: Literal[STATUSES] | None = None  # type: ignore[valid-type]
    attrs: Annotated[dict[str, Any], described("free per-event attributes")] | None = None
    credit: Annotated[dict[str, float], described("credit by '<method>/<unit>[/<channel>]'")] | None = None
    extra: dict[str, Any] | None = None

    @property
    def duration(self) -> float:
        """Seconds the event took; 0 for instantaneous events."""
        return 0.0 if self.t_end is None else max(0.0, self.t_end - self.t)

    @property
    def tokens(self) -> int:
        return (self.tokens_in or 0) + (self.tokens_out or 0)


class Edge(msgspec.Struct, frozen=True):
    """A typed dependency ``src -> dst`` between two event ids."""

    src: str
    dst: str
    type: str


class Trace(msgspec.Struct, kw_only=True):
    """One run of a multi-agent system."""

    trace_id: str
    task_id: str
    events: list[Event]
    edges: list[Edge] = msgspec.field(default_factory=list)
    rewards: dict[str, float] = msgspec.field(default_factory=dict)
    costs: dict[str, float] = msgspec.field(default_factory=dict)
    system: str | None = None
    topology: str | None = None
    metrics: dict[str, float] | None = None
    schema_version: str | None = None
    metadata: dict[str, Any] | None = None

    def agents(self) -> list[str]:
        """Agents that act in the trace, in order of first appearance."""
        return list(dict.fromkeys(e.agent for e in self.events))


# Field names of Event as they appear in JSON, in output order.
EVENT_JSON_FIELDS: Final = tuple(f.encode_name for f in msgspec.structs.fields(Event) if f.name != "extra")


def value_annotation(annotation: Any) -> Any:
    """The annotation of a field's value: ``X | None`` -> ``X`` (bounds kept)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        (one,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return one
    return annotation


def _value_type(annotation: Any) -> type:
    """The type of value a field holds: ``str | None`` -> str, ``dict[str, float] | None`` -> dict,
    ``Literal["ok", "error"]`` -> str."""
    one = value_annotation(annotation)
    if typing.get_origin(one) is Annotated:
        one = typing.get_args(one)[0]
    if typing.get_origin(one) is Literal:
        return type(typing.get_args(one)[0])
    return typing.get_origin(one) or one


#: The event fields every event has (the others are optional).
EVENT_REQUIRED_FIELDS: Final = frozenset(f.encode_name for f in msgspec.structs.fields(Event) if f.required)

#: JSON name of each known event field -> the type of its value (str, float, int, bool, dict), read
#: from ``Event``: validation's type groups and the store's columns follow a field added there.
EVENT_FIELD_TYPES: Final[dict[str, type]] = {
    f.encode_name: _value_type(f.type) for f in msgspec.structs.fields(Event) if f.name != "extra"
}
_EVENT_ATTR_BY_JSON: Final = {
    f.encode_name: f.name for f in msgspec.structs.fields(Event) if f.name != "extra"
}
TRACE_JSON_FIELDS: Final = (
    "schema_version",
    "trace_id",
    "task_id",
    "system",
    "topology",
    "events",
    "edges",
    "rewards",
    "costs",
    "metrics",
    "metadata",
)
#: Top-level fields holding an object (an event log's header and updates merge them key by key).
TRACE_OBJECT_FIELDS: Final = tuple(
    f.name for f in msgspec.structs.fields(Trace) if _value_type(f.type) is dict
)
#: Top-level fields holding numbers by name (rewards, costs, metrics).
TRACE_NUMBER_MAPS: Final = tuple(
    f.name for f in msgspec.structs.fields(Trace) if value_annotation(f.type) == dict[str, float]
)
_TRACE_OPTIONAL: Final = frozenset(f.name for f in msgspec.structs.fields(Trace) if f.default is None)
#: The top-level fields besides events and edges: what an event log's header and updates carry.
TRACE_HEADER_FIELDS: Final = tuple(k for k in TRACE_JSON_FIELDS if k not in ("events", "edges"))


def event_from_dict(d: dict[str, Any]) -> Event:
    """Build an Event from a decoded JSON object (already validated), keeping unknown fields."""
    kw: dict[str, Any] = {}
    extra: dict[str, Any] | None = None
    for k, v in d.items():
        name = _EVENT_ATTR_BY_JSON.get(k)
        if name is None:
            if extra is None:
                extra = {}
            extra[k] = v
        else:
            kw[name] = v
    if extra is not None:
        kw["extra"] = extra
    return Event(**kw)


def event_to_dict(e: Event) -> dict[str, Any]:
    """The JSON object of an event: known fields in schema order, then unknown ones."""
    d: dict[str, Any] = {}
    for json_name, attr in _EVENT_ATTR_BY_JSON.items():
        v = getattr(e, attr)
        if v is not None:
            d[json_name] = v
    if e.extra:
        for k, v in e.extra.items():
            d.setdefault(k, v)
    return d


def trace_from_dict(d: dict[str, Any]) -> Trace:
    """Build a Trace from a decoded JSON object that passed structural validation."""
    edges = [Edge(x["src"], x["dst"], x["type"]) for x in d.get("edges", ())]
    return trace_of(d, [event_from_dict(e) for e in d["events"]], edges)


def trace_of(top: dict[str, Any], events: list[Event], edges: list[Edge]) -> Trace:
    """A Trace of its events and edges and the top-level fields of a validated JSON object
    (absent ones take their defaults): the one place both loading paths build it."""
    return Trace(
        trace_id=top["trace_id"],
        task_id=top["task_id"],
        events=events,
        edges=edges,
        rewards=dict(top.get("rewards") or {}),
        costs=dict(top.get("costs") or {}),
        system=top.get("system"),
        topology=top.get("topology"),
        metrics=top.get("metrics"),
        schema_version=top.get("schema_version"),
        metadata=top.get("metadata"),
    )


def trace_to_dict(tr: Trace) -> dict[str, Any]:
    """The JSON object of a trace, keys in ``TRACE_JSON_FIELDS`` order; the optional ones (None
    by default) only when set."""
    d: dict[str, Any] = {}
    for k in TRACE_JSON_FIELDS:
        v = getattr(tr, k)
        if k == "events":
            v = [event_to_dict(e) for e in v]
        elif k == "edges":
            v = [{"src": x.src, "dst": x.dst, "type": x.type} for x in v]
        elif v is None and k in _TRACE_OPTIONAL:
            continue
        d[k] = v
    return d


def derived_costs(events: list[Event]) -> dict[str, float]:
    """Costs computed from events, used when a trace (e.g. a repaired log) carries none."""
    tokens = sum(e.tokens for e in events)
    end = max((e.t_end if e.t_end is not None else e.t) for e in events) if events else 0.0
    start = min(e.t for e in events) if events else 0.0
    usd = sum(e.cost_usd or 0.0 for e in events)
    costs: dict[str, float] = {
        "tokens": tokens,
        "wall_clock_s": round(max(0.0, end - start), 6),
        "tool_calls": sum(1 for e in events if e.type == "tool_call"),
        "messages": sum(1 for e in events if e.type == "message"),
    }
    if usd:
        costs["usd"] = usd
    return costs
