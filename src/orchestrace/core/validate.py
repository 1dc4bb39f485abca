"""Validation: structural rules (what the JSON Schema says) plus semantic rules (what a trace means).

Codes are stable (listed below and in the README); tools may match on them.

=====  ========  =================================================================
code   severity  rule
=====  ========  =================================================================
OT001  error     file cannot be read
OT002  error     invalid UTF-8
OT003  error     not JSON
OT004  error     NaN / Infinity
OT005  error     duplicate key in a JSON object
OT006  error     empty or truncated input
OT007  error     corrupt compressed stream
OT008  error     beyond a limit: integer outside signed 64-bit, nesting, string size, a float total (core.limits)
OT101  error     required field missing
OT102  error     wrong JSON type
OT103  error     unknown top-level field (the schema is closed at the top level)
OT104  error     value not in the allowed set (event type, edge type, topology, status, schema_version)
OT105  error     empty string where a non-empty one is required
OT106  error     ``events`` is empty
OT107  error     negative number where it must be >= 0 (t, costs, tokens)
OT108  error     unknown field on an edge (edges are closed)
OT110  error     bad event-log record
OT201  error     duplicate event id
OT202  error     edge endpoint is not an event id
OT203  error     cycle among dependency edges
OT204  error     edge goes backwards in time (t[src] > t[dst])
OT205  error     agent acts before it was spawned
OT206  error     return does not go back to the sender's spawner
OT207  error     tool_result without a matching earlier tool_call
OT208  error     non-finite reward, cost, metric or time
OT209  warning   ``from``/``to`` names an agent that never appears
OT210  error     event ends before it starts (t_end < t)
OT211  error     agent acts after it was despawned (and before it is spawned again)
OT212  warning   a ``return`` from an agent no spawn starts, in a trace that spawns its agents
OT213  warning   a second ``tool_result`` for one ``call_id``
OT214  warning   a ``spawn`` that names no agent (no ``to``)
OT215  warning   a trace id met again in one file, with other content (ingest refuses it)
OT216  warning   a trace repeated in one file (same id and content; stored and measured once)
=====  ========  =================================================================

All edge types order their endpoints (src happens before dst), so the acyclicity rule covers
every edge type; ``temporal`` included.

How a trace is read decides who checks its structure, once: a clean text is decoded into
``fastcheck``'s structs, where msgspec has checked every field's type and bounds, and
``fastcheck.columns`` only pulls out the columns the semantic rules read; anything else (a dict
from orjson or in memory) is walked once by ``_scan_events`` and ``_scan_edges``, which report
each problem with its pointer. The semantic rules (``_check_graph``) and the limits
(``_check_limits``) then run on those columns, the same for both. There is no separate "fast"
walk of dicts that only says clean or not: the column-wise one it used to be took 1.2 s on a
200,000-event trace where the walk with pointers takes 0.56 s.
"""

from __future__ import annotations

import bisect
import math
import os
import reprlib
import typing
from collections import defaultdict
from collections.abc import Iterable, Iterator
from itertools import chain, compress, repeat
from operator import attrgetter
from typing import Annotated, Any, Literal, NamedTuple

import msgspec
import numpy as np
import orjson
from msgspec import Meta

from .errors import Finding, InvalidTrace, LoadError
from .fastcheck import VEvent, VTrace, columns, columns_of, decode_clean, decode_records
from .limits import (
    FLOAT_TOTALS,
    INT64_MAX,
    INT64_MIN,
    MAX_STRING_CHARS,
    check_value,
    float_total,
    may_hold_long_string,
    needs_exact_check,
)
from .model import (
    EDGE_TYPES,
    EVENT_REQUIRED_FIELDS,
    EVENT_TYPES,
    REQUIRED_COSTS,
    SCHEMA_VERSION,
    TOPOLOGIES,
    TRACE_JSON_FIELDS,
    Event,
    value_annotation,
)
from .read import (
    Piece,
    RawTrace,
    find_duplicate_key,
    iter_docs,
    iter_raw,
    iter_span_docs,
    merge_log_header,
    open_read,
    parse_json,
    split_format,
    stdin_copy,
)

_EVENT_TYPES = frozenset(EVENT_TYPES)
_EDGE_TYPES = frozenset(EDGE_TYPES)
_TOPOLOGIES = frozenset(TOPOLOGIES)
_TOP_REQUIRED = tuple(f.encode_name for f in msgspec.structs.fields(VTrace) if f.required)
_TOP_ALLOWED = frozenset(TRACE_JSON_FIELDS)
_EVENT_REQUIRED = EVENT_REQUIRED_FIELDS
_EDGE_KEYS = frozenset(("src", "dst", "type"))
_INF = math.inf

DEFAULT_MAX_FINDINGS = 200


class ValidationResult(msgspec.Struct):
    path: str
    valid: bool
    findings: list[Finding]
    traces: int = 0
    truncated: int = 0  # findings beyond the cap, counted but not listed

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "valid": self.valid,
            "traces": self.traces,
            "findings": [
                {
                    "code": f.code,
                    "severity": f.severity,
                    "pointer": f.pointer,
                    "line": f.line,
                    "message": f.message,
                }
                for f in self.findings
            ],
            "findings_not_listed": self.truncated,
        }


class _Sink:
    """Collects findings, keeping at most ``cap`` but counting all."""

    def __init__(self, raw: RawTrace, cap: int) -> None:
        self.raw = raw
        self.cap = cap
        self.items: list[Finding] = []
        self.dropped = 0
        self.errors = 0

    def add(
        self, code: str, msg: str, pointer: str | None, *, warn: bool = False, line: int | None = None
    ) -> None:
        if not warn:
            self.errors += 1
        if len(self.items) >= self.cap:
            self.dropped += 1
            return
        if line is None:
            line = self._line(pointer)
        self.items.append(
            Finding(
                code=code,
                severity="warning" if warn else "error",
                message=msg,
                pointer=pointer,
                line=line,
                path=self.raw.path,
            )
        )

    def _line(self, pointer: str | None) -> int | None:
        raw = self.raw
        if raw.line is not None:
            return raw.line
        if pointer and raw.event_lines is not None:
            parts = pointer.split("/")
            if len(parts) > 2 and parts[2].isdigit():
                i = int(parts[2])
                lines = (
                    raw.event_lines
                    if parts[1] == "events"
                    else raw.edge_lines
                    if parts[1] == "edges"
                    else None
                )
                if lines is not None and i < len(lines):
                    return lines[i]
        return None


def _jtype(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int | float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _is_num(v: Any) -> bool:
    t = type(v)
    return t is float or t is int


def _opt_str(v: Any) -> bool:
    return type(v) is str


def _opt_bool(v: Any) -> bool:
    return type(v) is bool


def _opt_nonneg_int(v: Any) -> bool:
    return type(v) is int and 0 <= v <= INT64_MAX


def _opt_nonneg_num(v: Any) -> bool:
    return _is_num(v) and 0 <= v < _INF


def _opt_dict(v: Any) -> bool:
    return type(v) is dict


def _opt_num_map(v: Any) -> bool:
    return type(v) is dict and all(_is_num(x) and math.isfinite(x) for x in v.values())


def _field_rule(annotation: Any) -> tuple[Any, str, str]:
    """(check, finding code, what the value must be) of an optional event field, read from its
    annotation in ``model.Event``; a value kind without a rule here fails at import."""
    value = value_annotation(annotation)
    meta = Meta()
    if typing.get_origin(value) is Annotated:
        value, meta = typing.get_args(value)[:2]
    code = (meta.extra or {}).get("finding", "OT102")
    origin = typing.get_origin(value)
    if origin is Literal:
        choices = typing.get_args(value)
        check, code = (lambda v: type(v) is str and v in choices), "OT104"
        expect = "one of " + ", ".join(f'"{c}"' for c in choices)
    elif value is str:
        check, expect = _opt_str, "a string"
    elif value is bool:
        check, expect = _opt_bool, "a boolean"
    elif value is int and meta.ge == 0:
        check, expect = _opt_nonneg_int, "an integer from 0 to 2**63 - 1"
    elif value is float and meta.ge == 0:
        check, expect = _opt_nonneg_num, "a finite number >= 0"
    elif origin is dict and typing.get_args(value)[1] is float:
        check, expect = _opt_num_map, "an object of finite numbers"
    elif origin is dict:
        check, expect = _opt_dict, "an object"
    else:
        raise TypeError(f"no validation rule for an event field of type {value}")
    return check, code, f"{expect} ({meta.description})" if meta.description else expect


#: Optional event fields: JSON name -> (check, finding code, expectation). A check returns True when fine.
_OPTIONAL_EVENT_FIELDS: dict[str, tuple[Any, str, str]] = {
    f.encode_name: _field_rule(f.type)
    for f in msgspec.structs.fields(Event)
    if not f.required and f.name != "extra"
}


#: Every event field the schema names; other fields are kept verbatim, free-form like ``attrs``.
_EVENT_FIELD_NAMES = frozenset(_OPTIONAL_EVENT_FIELDS) | frozenset(_EVENT_REQUIRED)


def check_raw(
    raw: RawTrace,
    *,
    raise_on_error: bool = False,
    max_findings: int = DEFAULT_MAX_FINDINGS,
    source: bytes | None = None,
) -> tuple[list[Finding], int]:
    """Validate one decoded trace object; returns (findings, findings not listed).

    With ``raise_on_error`` an InvalidTrace carrying every finding is raised on any error.
    """
    sink = _Sink(raw, max_findings)
    for err in raw.log_errors:
        sink.add(err.code, err.message, err.pointer, line=err.line)
    for ptr, key, line in raw.duplicates:
        sink.add(
            "OT005",
            f"duplicate key {_short(key)} in one object: the value would be silently overwritten",
            ptr or "/",
            line=line,
        )
    if source is not None:
        if dup := find_duplicate_key(source, raw.data):
            sink.add(
                "OT005",
                f"duplicate key {_short(dup[1])} in one object: the value would be silently overwritten",
                dup[0] or "/",
            )
    if raw.data is not None or not raw.log_errors:
        _check(raw.data, sink)
    if raise_on_error and sink.errors:
        raise InvalidTrace(sink.items, path=raw.path)
    return sink.items, sink.dropped


def _check(d: Any, s: _Sink, prepared: tuple[Any, ...] | None = None) -> None:
    """All rules on one trace object. ``prepared`` holds the columns of already-validated
    struct events (the fast paths), which then skip the per-event structural scan."""
    if not isinstance(d, dict):
        s.add("OT102", f"expected a trace object at the top level, got {_jtype(d)}", "")
        return
    derived_costs = d.get("_derived_costs", False)
    for k in _TOP_REQUIRED:
        if k not in d and not (k == "costs" and derived_costs):
            s.add("OT101", f"missing required field {_short(k)}", "")
    for k in d:
        if k not in _TOP_ALLOWED and k != "_derived_costs":
            s.add("OT103", f"unknown top-level field {_short(k)}: put extra data under 'metadata'", f"/{k}")
    for k in ("trace_id", "task_id"):
        v = d.get(k)
        if k in d and type(v) is not str:
            s.add("OT102", f"{k} must be a string, got {_jtype(v)}", f"/{k}")
        elif k in d and not v:
            s.add("OT105", f"{k} must be a non-empty string", f"/{k}")
    for k in ("system", "schema_version"):
        if k in d and type(d[k]) is not str:
            s.add("OT102", f"{k} must be a string, got {_jtype(d[k])}", f"/{k}")
    if type(d.get("schema_version")) is str and d["schema_version"] != SCHEMA_VERSION:
        # a trace of another (future or foreign) schema was read as this one without a word
        s.add(
            "OT104",
            f"schema_version {_short(d['schema_version'])} is not one this orchestrace reads ({SCHEMA_VERSION})",
            "/schema_version",
        )
    if "topology" in d and (type(d["topology"]) is not str or d["topology"] not in _TOPOLOGIES):
        s.add("OT104", f"topology {_short(d['topology'])} is not one of {', '.join(TOPOLOGIES)}", "/topology")
    if "metadata" in d and type(d["metadata"]) is not dict:
        s.add("OT102", f"metadata must be an object, got {_jtype(d['metadata'])}", "/metadata")
    for k in ("rewards", "metrics"):
        if k in d:
            _check_num_map(d[k], k, s, nonneg=False)
    if "costs" in d:
        c = d["costs"]
        _check_num_map(c, "costs", s, nonneg=True)
        if type(c) is dict:
            for req in REQUIRED_COSTS:
                if req not in c:
                    s.add("OT101", f"costs must have {_short(req)} (a number >= 0)", "/costs")

    events = d.get("events")
    edges = d.get("edges")
    if "events" in d and type(events) is not list:
        s.add("OT102", f"events must be an array, got {_jtype(events)}", "/events")
        events = None
    elif type(events) is list and not events:
        s.add("OT106", "events must contain at least one event", "/events")
    if "edges" in d and type(edges) is not list:
        s.add("OT102", f"edges must be an array, got {_jtype(edges)}", "/edges")
        edges = None
    if events and prepared is not None:
        _check_graph(events, *prepared, s)
    elif events:
        _check_events_and_edges(events, edges or [], s)
    _check_limits(d.get("metadata"), events or [], s)


def _check_limits(metadata: Any, events: list[Any], s: _Sink) -> None:
    """``core.limits`` on what the schema leaves open: the free-form ``metadata`` and ``attrs``
    (nesting, integers, strings) and the token total, which must fit the int64 it is summed in."""
    attrs_depth = 1 if s.raw.event_lines is not None else 3  # a log record is a document itself
    if type(metadata) is dict and (over := check_value(metadata, "/metadata", 1)) is not None:
        s.add("OT008", over.message, over.pointer)
    if not events:
        return
    kinds = set(map(type, events))
    if kinds == {dict}:
        attrs = list(enumerate(_column(events, "attrs")))
        tokens = [v for k in ("tokens_in", "tokens_out") for v in _column(events, k) if type(v) is int]
        floats = {k: _column(events, k) for k in FLOAT_TOTALS}
    elif kinds == {VEvent}:  # the fast paths: one map per field, C speed
        # UNSET and None are false, as are empty attrs and zeros, which change no check or sum
        col = list(map(attrgetter("attrs"), events))
        attrs = list(zip(compress(range(len(col)), col), filter(None, col), strict=True)) if any(col) else []
        tokens = [sum(filter(None, map(attrgetter(k), events))) for k in ("tokens_in", "tokens_out")]
        floats = {k: [sum(filter(None, map(attrgetter(k), events)))] for k in FLOAT_TOTALS}
        floats = {  # a finite sum settles it; else float_total on the values, which skips infinities
            k: v if math.isfinite(v[0]) else list(filter(None, map(attrgetter(k), events)))
            for k, v in floats.items()
        }
    else:  # objects mixed with other values (reported as type errors already)
        rows = [(i, e) for i, e in enumerate(events) if type(e) is dict or isinstance(e, VEvent)]
        attrs = [(i, e.get("attrs")) for i, e in rows]
        tokens = [v for _, e in rows for v in (e.get("tokens_in"), e.get("tokens_out")) if type(v) is int]
        floats = {k: [e.get(k) for _, e in rows] for k in FLOAT_TOTALS}
    for k, vals in floats.items():
        if math.isinf(float_total(vals)):
            s.add(
                "OT008",
                f"{k} summed over the events overflows a float (past 1.8e308): {FLOAT_TOTALS[k]} would be infinite",
                "/events",
            )
    for i, a in attrs:
        if type(a) is dict and a and (over := check_value(a, f"/events/{i}/attrs", attrs_depth)) is not None:
            s.add("OT008", over.message, over.pointer)
    for i, k, v in _unknown_event_fields(events) if dict in kinds else ():
        pointer = f"/events/{i}/" + k.replace("~", "~0").replace("/", "~1")
        if (over := check_value(v, pointer, attrs_depth)) is not None:
            s.add("OT008", over.message, over.pointer)
    total = sum(tokens)
    if total > INT64_MAX:
        s.add("OT008", f"token counts (tokens_in + tokens_out) sum to {total}, over 2**63 - 1", "/events")
    if s.raw.large:
        _check_string_sizes(events, s)


def _unknown_event_fields(events: list[Any]) -> list[tuple[int, str, Any]]:
    """(event index, key, value) of the event fields the schema does not name, which are kept
    verbatim and so need the same limits as ``attrs``. Struct events have none (the fast path
    skips unknown fields and falls back to dicts when the key count shows one)."""
    dicts = events if set(map(type, events)) == {dict} else [e for e in events if type(e) is dict]
    if _EVENT_FIELD_NAMES.issuperset(chain.from_iterable(map(dict.keys, dicts))):  # C speed, the usual case
        return []
    named = _EVENT_FIELD_NAMES
    return [
        (i, k, v) for i, e in enumerate(events) if type(e) is dict for k, v in e.items() if k not in named
    ]


def _check_string_sizes(events: list[Any], s: _Sink) -> None:
    """Strings past MAX_STRING_CHARS in event fields; only a document larger than the limit
    can hold one, so this runs for those alone."""
    for i, e in enumerate(events):
        row = e if type(e) is dict else msgspec.structs.asdict(e) if isinstance(e, VEvent) else {}
        for k, v in row.items():
            if len(k) > MAX_STRING_CHARS or (type(v) is str and len(v) > MAX_STRING_CHARS):
                s.add("OT008", f"string of more than {MAX_STRING_CHARS:,} characters", f"/events/{i}/{k}")


def _check_num_map(m: Any, name: str, s: _Sink, *, nonneg: bool) -> None:
    if type(m) is not dict:
        s.add("OT102", f"{name} must be an object of numbers, got {_jtype(m)}", f"/{name}")
        return
    for k, v in m.items():
        if not _is_num(v):
            s.add("OT102", f"{name}.{k} must be a number, got {_jtype(v)}", f"/{name}/{k}")
        elif type(v) is int and not INT64_MIN <= v <= INT64_MAX:
            s.add("OT008", f"{name}.{k} is an integer outside the signed 64-bit range", f"/{name}/{k}")
        elif not math.isfinite(v):
            s.add("OT208", f"{name}.{k} must be finite, got {v}", f"/{name}/{k}")
        elif nonneg and v < 0:
            s.add("OT107", f"{name}.{k} must be >= 0, got {v}", f"/{name}/{k}")


def _check_events_and_edges(events: list[Any], edges: list[Any], s: _Sink) -> None:
    index, t_arr, ok_t, types, agents, interesting = _scan_events(events, s)
    src, dst = _scan_edges(edges, index, s)
    _check_graph(events, index, t_arr, ok_t, types, agents, interesting, src, dst, s)


def _check_graph(
    events: list[Any],
    index: dict[str, int],
    t_arr: np.ndarray,
    ok_t: np.ndarray,
    types: list[Any],
    agents: list[Any],
    interesting: list[int],
    src: np.ndarray,
    dst: np.ndarray,
    s: _Sink,
) -> None:
    """The semantic rules, on columns both the dict path and the struct path produce."""
    add = s.add
    n, m = len(events), len(src)
    good = (src >= 0) & (dst >= 0)
    if m:
        gi = np.nonzero(good)[0]
        s_, d_ = src[gi], dst[gi]
        both_t = ok_t[s_] & ok_t[d_]
        back = gi[both_t & (t_arr[s_] > t_arr[d_])]
        listed = back[: max(0, s.cap - len(s.items))]  # the rest counted, not written out
        for j in listed:
            a, b = int(src[j]), int(dst[j])
            add(
                "OT204",
                f"edge goes backwards in time: {_short(events[a]['id'])} at t={t_arr[a]:g} -> {_short(events[b]['id'])} at t={t_arr[b]:g}",
                f"/edges/{int(j)}",
            )
        s.dropped += len(back) - len(listed)
        s.errors += len(back) - len(listed)
        _check_cycles(src[gi], dst[gi], gi, t_arr, n, bool(len(back)), events, s)

    _check_semantics(events, types, agents, t_arr, ok_t, interesting, s)


def _column(rows: list[dict[str, Any]], key: str) -> list[Any]:
    """The value under ``key`` of each row, None where absent, at C speed."""
    return list(map(dict.get, rows, repeat(key, len(rows))))


def _scan_events(events: list[Any], s: _Sink) -> tuple[Any, ...]:
    """Per-event structural check that reports every problem with its pointer."""
    n = len(events)
    index: dict[str, int] = {}
    t_arr = np.zeros(n, dtype=np.float64)
    ok_t = np.ones(n, dtype=bool)
    types: list[Any] = [None] * n
    agents: list[Any] = [None] * n
    interesting: list[int] = []  # spawn, return, tool events, events with from/to
    ev_types = _EVENT_TYPES
    opt = _OPTIONAL_EVENT_FIELDS
    req = _EVENT_REQUIRED
    add = s.add
    for i, ev in enumerate(events):
        if type(ev) is not dict:
            add("OT102", f"event must be an object, got {_jtype(ev)}", f"/events/{i}")
            ok_t[i] = False
            continue
        eid = ev.get("id")
        t = ev.get("t")
        ty = ev.get("type")
        ag = ev.get("agent")
        if type(eid) is not str or not eid:
            if "id" not in ev:
                add("OT101", "event is missing required field 'id'", f"/events/{i}")
            elif type(eid) is not str:
                add("OT102", f"id must be a string, got {_jtype(eid)}", f"/events/{i}/id")
            else:
                add("OT105", "id must be a non-empty string", f"/events/{i}/id")
        elif eid in index:
            add(
                "OT201",
                f"duplicate event id {_short(eid)} (first at /events/{index[eid]})",
                f"/events/{i}/id",
            )
        else:
            index[eid] = i
        tt = type(t)
        if (tt is float or tt is int) and 0 <= t < _INF:
            t_arr[i] = t
        else:
            ok_t[i] = False
            if t is None and "t" not in ev:
                add("OT101", "event is missing required field 't' (seconds from trace start)", f"/events/{i}")
            elif tt is not float and tt is not int:
                add("OT102", f"t must be a number, got {_jtype(t)}", f"/events/{i}/t")
            elif t != t or t == _INF:
                add("OT208", f"t must be finite, got {t}", f"/events/{i}/t")
            else:
                add("OT107", f"t must be >= 0, got {t}", f"/events/{i}/t")
        if type(ty) is not str or ty not in ev_types:
            if "type" not in ev:
                add("OT101", "event is missing required field 'type'", f"/events/{i}")
            else:
                add(
                    "OT104",
                    f"event type {_short(ty)} is not one of {', '.join(EVENT_TYPES)}",
                    f"/events/{i}/type",
                )
        else:
            types[i] = ty
            if ty in ("spawn", "return", "tool_call", "tool_result", "despawn"):
                interesting.append(i)
        if type(ag) is not str or not ag:
            if "agent" not in ev:
                add("OT101", "event is missing required field 'agent'", f"/events/{i}")
            elif type(ag) is not str:
                add("OT102", f"agent must be a string, got {_jtype(ag)}", f"/events/{i}/agent")
            else:
                add("OT105", "agent must be a non-empty string", f"/events/{i}/agent")
        else:
            agents[i] = ag
        if len(ev) > 4:
            for k, v in ev.items():
                if k in req:
                    continue
                rule = opt.get(k)
                if rule is not None and not rule[0](v):
                    add(rule[1], f"{k} must be {rule[2]}, got {_jtype(v)} {_short(v)}", f"/events/{i}/{k}")
            te = ev.get("t_end")
            if te is not None and _is_num(te) and ok_t[i] and te < t:
                add("OT210", f"t_end {te} is before t {t}", f"/events/{i}/t_end")

    return index, t_arr, ok_t, types, agents, interesting


def _scan_edges(edges: list[Any], index: dict[str, int], s: _Sink) -> tuple[np.ndarray, np.ndarray]:
    """Per-edge structural check: (source, destination) event positions, -1 where unknown."""
    add = s.add
    m = len(edges)
    src = [-1] * m
    dst = [-1] * m
    etypes = _EDGE_TYPES
    keys = _EDGE_KEYS
    get = index.get
    for j, ed in enumerate(edges):
        if type(ed) is not dict:
            add("OT102", f"edge must be an object, got {_jtype(ed)}", f"/edges/{j}")
            continue
        a, b, ty = ed.get("src"), ed.get("dst"), ed.get("type")
        if type(a) is str and type(b) is str and type(ty) is str and ty in etypes and ed.keys() == keys:
            ka, kb = get(a), get(b)  # the usual edge: only its endpoints can be wrong
            if ka is not None and kb is not None:
                src[j], dst[j] = ka, kb
                continue
        if len(ed) != 3 or ed.keys() != keys:
            for k in keys - ed.keys():
                add("OT101", f"edge is missing required field {_short(k)}", f"/edges/{j}")
            for k in ed.keys() - keys:
                add(
                    "OT108",
                    f"unknown edge field {_short(k)}: edges have exactly src, dst, type",
                    f"/edges/{j}/{k}",
                )
        if "type" in ed and (type(ty) is not str or ty not in etypes):
            hint = " (the survey's label msg is written message)" if ty == "msg" else ""
            add(
                "OT104",
                f"edge type {_short(ty)} is not one of {', '.join(EDGE_TYPES)}{hint}",
                f"/edges/{j}/type",
            )
        for key, v, ends in (("src", a, src), ("dst", b, dst)):
            if key not in ed:
                continue
            if type(v) is not str:
                add("OT102", f"{key} must be a string, got {_jtype(v)}", f"/edges/{j}/{key}")
                continue
            k = get(v)
            if k is None:
                add("OT202", f"edge {key} {_short(v)} is not the id of any event", f"/edges/{j}/{key}")
            else:
                ends[j] = k
    return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist = 2, 3, 3
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = 40


def _short(v: Any) -> str:
    """A bounded repr of a user value: any depth, any length, one short line."""
    r = _REPR.repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _check_cycles(
    src: np.ndarray,
    dst: np.ndarray,
    eidx: np.ndarray,
    t: np.ndarray,
    n: int,
    has_back: bool,
    events: list[Any],
    s: _Sink,
) -> None:
    """Report one cycle if the edges have any. Forward-in-time edges cannot close a cycle, so
    without backward edges only edges between equal times need checking."""
    if not has_back:
        tie = t[src] == t[dst]
        src, dst, eidx = src[tie], dst[tie], eidx[tie]
    if not len(src):
        return
    cyc = find_cycle(src, dst, n)
    if cyc is not None:
        ids = [events[i]["id"] for i in cyc]
        first_edge = None
        pairs = set(zip(cyc, cyc[1:] + cyc[:1], strict=True))
        for a, b, j in zip(src.tolist(), dst.tolist(), eidx.tolist(), strict=True):
            if (a, b) in pairs:
                first_edge = j
                break
        s.add("OT203", f"cycle among dependency edges: {' -> '.join(ids + ids[:1])}", f"/edges/{first_edge}")


def find_cycle(src: np.ndarray, dst: np.ndarray, n: int) -> list[int] | None:
    """Nodes of one directed cycle, or None (Kahn's algorithm, then a walk inside the rest)."""
    nodes = np.unique(np.concatenate([src, dst]))
    indeg = defaultdict(int)
    out: dict[int, list[int]] = defaultdict(list)
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        out[a].append(b)
        indeg[b] += 1
    stack = [int(v) for v in nodes if indeg[int(v)] == 0]
    removed = 0
    while stack:
        v = stack.pop()
        removed += 1
        for w in out[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    if removed == len(nodes):
        return None
    remaining = {int(v) for v in nodes if indeg[int(v)] > 0}
    # every remaining node has an in-edge from a remaining node: walk predecessors until a repeat
    pred: dict[int, int] = {}
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        if a in remaining and b in remaining:
            pred.setdefault(b, a)
    v = next(iter(remaining))
    seen: dict[int, int] = {}
    path: list[int] = []
    while v not in seen:
        seen[v] = len(path)
        path.append(v)
        v = pred[v]
    cyc = path[seen[v] :]
    cyc.reverse()
    return cyc


def _tools_paired_by_id(events: list[Any], types: list[Any], t: np.ndarray, idx: list[int]) -> bool:
    """Fast path: every tool event has a call_id and every result's call starts no later."""
    calls, results = _of_type(types, idx, "tool_call"), _of_type(types, idx, "tool_result")
    call_ids = _values(events, calls, "call_id")
    result_ids = _values(events, results, "call_id")
    if not set(map(type, call_ids)) | set(map(type, result_ids)) <= {str}:
        return False
    started = dict(zip(call_ids, t[calls].tolist(), strict=True))
    if len(started) != len(call_ids) or len(set(result_ids)) != len(result_ids):
        return False
    when = np.fromiter(map(started.get, result_ids, repeat(_INF)), np.float64, len(result_ids))
    return bool(np.all(when <= t[results]))


def _of_type(types: list[Any], idx: list[int], name: str) -> list[int]:
    """The indices in ``idx`` of events of type ``name`` (C speed)."""
    return list(compress(idx, map(name.__eq__, map(types.__getitem__, idx))))


def _values(events: list[Any], idx: list[int], key: str) -> list[Any]:
    """The field ``key`` of the events at ``idx``, None where absent: ``[events[i].get(key) for i
    in idx]`` without a Python call per event (the rows are all dicts or all structs)."""
    rows = list(map(events.__getitem__, idx))
    if set(map(type, rows)) == {dict}:
        return list(map(dict.get, rows, repeat(key, len(rows))))
    if set(map(type, rows)) == {VEvent}:
        vals = list(map(attrgetter("from_" if key == "from" else key), rows))
        return [None if v is msgspec.UNSET else v for v in vals] if msgspec.UNSET in vals else vals
    return [e.get(key) for e in rows]


def _named_agents(events: list[Any]) -> set[str]:
    """Every string in a ``from`` or ``to`` field."""
    if events and isinstance(events[0], VEvent) and set(map(type, events)) == {VEvent}:
        named = {e.from_ for e in events}
        named.update([e.to for e in events])
        return {v for v in named if type(v) is str}
    rows = [ev for ev in events if type(ev) is dict]
    named: set[str] = set()
    for k in ("from", "to"):
        vals = list(map(dict.get, rows, repeat(k, len(rows))))
        try:
            named.update(v for v in set(vals) if type(v) is str)
        except TypeError:  # an unhashable value (already reported as a type error)
            named.update(v for v in vals if type(v) is str)
    return named


def _check_semantics(
    events: list[Any],
    types: list[Any],
    agents: list[Any],
    t: np.ndarray,
    ok_t: np.ndarray,
    interesting: list[int],
    s: _Sink,
) -> None:
    # spawn times and spawners
    spawn_t: dict[str, float] = {}
    spawner: dict[str, str] = {}
    spawns = _of_type(types, interesting, "spawn")
    for i, child in zip(spawns, _values(events, spawns, "to"), strict=True):
        if child is None:
            s.add(
                "OT214", "spawn names no agent (to): nothing counts it as spawned", f"/events/{i}", warn=True
            )
        if ok_t[i] and isinstance(child, str) and (child not in spawn_t or t[i] < spawn_t[child]):
            spawn_t[child] = float(t[i])
            if isinstance(agents[i], str):
                spawner[child] = agents[i]
    # acting before spawn: only events of spawned agents can violate; spawning counts as acting
    # (a spawned b, then b spawned a: a spawn cycle was valid)
    if spawn_t:
        born = np.asarray(list(map(spawn_t.get, agents, repeat(-1.0, len(agents)))), dtype=np.float64)
        for i in np.nonzero(ok_t & (t < born))[0].tolist():
            ag, st = agents[i], born[i]
            s.add(
                "OT205",
                f"agent {_short(ag)} acts at t={t[i]:g} before it is spawned at t={st:g}",
                f"/events/{i}",
            )
    _check_despawned(events, types, agents, t, ok_t, spawns, _of_type(types, interesting, "despawn"), s)
    # returns go back to the spawner; tool results follow calls
    if _tools_paired_by_id(events, types, t, interesting):
        interesting = _of_type(types, interesting, "return")
    order = sorted(interesting, key=lambda i: (t[i], i))
    calls_by_id: dict[str, float] = {}
    results_by_id: dict[str, int] = {}
    open_calls: dict[str, int] = defaultdict(int)
    for i in order:
        ty = types[i]
        ev = events[i]
        if ty == "return":
            sender = ev.get("from")
            if type(sender) is not str or not sender:
                sender = agents[i]
            boss = spawner.get(sender) if type(sender) is str else None
            target = ev.get("to")
            if spawn_t and type(sender) is str and sender not in spawn_t:
                s.add(
                    "OT212",
                    f"return from {_short(sender)}, which no spawn event starts (this trace spawns its agents)",
                    f"/events/{i}",
                    warn=True,
                )
            if boss is not None and isinstance(target, str) and target != boss:
                s.add(
                    "OT206",
                    f"return from {_short(sender)} goes to {_short(target)}, but {_short(sender)} was spawned by {_short(boss)}",
                    f"/events/{i}/to",
                )
        elif ty == "tool_call":
            cid = ev.get("call_id")
            if isinstance(cid, str):
                calls_by_id[cid] = float(t[i])
            open_calls[str(ev.get("tool"))] += 1
        elif ty == "tool_result":
            cid = ev.get("call_id")
            tool = str(ev.get("tool"))
            if isinstance(cid, str):
                if cid not in calls_by_id:
                    s.add(
                        "OT207",
                        f"tool_result for call_id {_short(cid)} has no earlier tool_call with that call_id",
                        f"/events/{i}",
                    )
                elif cid in results_by_id:
                    s.add(
                        "OT213",
                        f"second tool_result for call_id {_short(cid)} (the first: /events/{results_by_id[cid]})",
                        f"/events/{i}",
                        warn=True,
                    )
                results_by_id.setdefault(cid, i)
                open_calls[tool] -= 1
            elif open_calls[tool] > 0:
                open_calls[tool] -= 1
            else:
                s.add(
                    "OT207",
                    f"tool_result of tool {_short(ev.get('tool'))} has no earlier unmatched tool_call of that tool",
                    f"/events/{i}",
                )
    # from/to name known agents
    known = set(agents)  # strings, and None for an event whose agent is not one
    known.discard(None)
    known.update(spawn_t)
    if _named_agents(events) <= known:
        return
    for i, ev in enumerate(events):
        if type(ev) is dict and "from" not in ev and "to" not in ev:
            continue
        if not (type(ev) is dict or isinstance(ev, VEvent)):  # reported as a type error already
            continue
        for k in ("from", "to"):
            v = ev.get(k)
            if isinstance(v, str) and v not in known and not (types[i] == "spawn" and k == "to"):
                s.add(
                    "OT209",
                    f"{k} names agent {_short(v)}, which never acts and is never spawned",
                    f"/events/{i}/{k}",
                    warn=True,
                )


def _check_despawned(
    events: list[Any],
    types: list[Any],
    agents: list[Any],
    t: np.ndarray,
    ok_t: np.ndarray,
    spawns: list[int],
    despawns: list[int],
    s: _Sink,
) -> None:
    """OT211: an agent acts after its despawn and before any later spawn of it."""
    if not despawns:
        return
    life: dict[str, list[tuple[float, int]]] = defaultdict(list)  # (t, 0 despawn / 1 spawn)
    for i in sorted(spawns + despawns):
        if ok_t[i]:
            who = events[i].get("to")
            if isinstance(who, str):
                life[who].append((float(t[i]), int(types[i] == "spawn")))
    gone = {a: sorted(v) for a, v in life.items() if any(k == 0 for _, k in v)}
    if not gone:
        return
    for i, ag in enumerate(agents):
        if type(ag) is not str or ag not in gone or not ok_t[i]:
            continue
        marks = gone[ag]
        last = bisect.bisect_left(marks, (float(t[i]), -1)) - 1  # the last mark strictly before
        if last >= 0 and marks[last][1] == 0:
            s.add(
                "OT211",
                f"agent {_short(ag)} acts at t={t[i]:g} after it was despawned at t={marks[last][0]:g}",
                f"/events/{i}",
            )


# ---------------------------------------------------------------- files


def validate_path(
    path: str | os.PathLike[str], *, max_findings: int = DEFAULT_MAX_FINDINGS
) -> ValidationResult:
    """Validate every trace in a file. I/O and parse problems become findings, never exceptions."""
    p = os.fspath(path)
    if p == "-":
        return _validate_stdin(max_findings)
    return merge_pieces(p, [check_piece(Piece(p), max_findings)], max_findings)


class PieceCheck(msgspec.Struct):
    """What one piece of a file holds (``check_piece``), for ``merge_pieces`` to make the
    file's result: pieces checked in any process give the result of the file checked whole."""

    findings: list[Finding]  # at most the file's cap
    dropped: int
    traces: int
    ids: list[tuple[str, int | None]]  # (trace id, line) of each trace that has one, in order
    stopped: Finding | None = None  # the read error that ends the file here


def check_piece(piece: Piece, max_findings: int = DEFAULT_MAX_FINDINGS) -> PieceCheck:
    """Every trace of ``piece`` (a whole file, or lines of a JSONL file), each checked alone."""
    p = piece.path
    fmt, _ = split_format(p)
    if fmt == "events" and piece.end is None:
        try:
            fast = _check_log_fast(p, max_findings)
        except LoadError:
            fast = None  # the dict path below reports the read error with its line
        if fast is not None:
            return PieceCheck(fast[0], fast[1], 1, [])
    out = PieceCheck([], 0, 0, [])
    try:
        if fmt == "events":
            docs: Iterator[RawTrace | tuple[bytes, int | None]] = iter_raw(
                p, check_duplicates=True, collect_errors=True
            )
        elif piece.end is None:
            docs = iter_docs(p, fmt)
        else:
            docs = iter_span_docs(p, piece.start, piece.end, piece.first_line)
        for doc in docs:
            out.traces += 1
            budget = max(0, max_findings - len(out.findings))
            if isinstance(doc, tuple):
                items, more, tid = _check_doc(doc, p, budget)
                if tid is not None:
                    out.ids.append((tid, doc[1]))
            else:
                items, more = check_raw(doc, max_findings=budget)
            out.findings.extend(items)
            out.dropped += more
    except LoadError as e:
        out.stopped = e.finding()
    return out


def merge_pieces(
    p: str, checks: Iterable[PieceCheck], max_findings: int = DEFAULT_MAX_FINDINGS
) -> ValidationResult:
    """The result of file ``p`` from its pieces' checks, in file order: the first
    ``max_findings`` findings listed and the rest counted, as if one pass had read it; a piece
    that stopped on a read error ends the file; then the trace ids met again."""
    findings: list[Finding] = []
    dropped = count = 0
    first_line: dict[str, int | None] = {}  # trace id -> line of its first trace in the file
    repeats: list[tuple[str, int | None, int | None]] = []
    stopped = None
    for c in checks:
        room = max(0, max_findings - len(findings))
        findings.extend(c.findings[:room])
        dropped += c.dropped + max(0, len(c.findings) - room)
        count += c.traces
        for tid, line in c.ids:
            if tid in first_line:
                repeats.append((tid, first_line[tid], line))
            else:
                first_line[tid] = line
        if c.stopped is not None:
            stopped = c.stopped
            break
    if stopped is None:
        try:
            repeated = _repeated_ids(p, split_format(p)[0], repeats)
        except LoadError as e:  # read again and failed: that read error ends the file
            stopped = e.finding()
        else:
            room = max(0, max_findings - len(findings))
            findings.extend(repeated[:room])
            dropped += max(0, len(repeated) - room)
    if stopped is not None:
        findings.append(stopped)
    valid = not any(f.severity == "error" for f in findings) and dropped == 0
    return ValidationResult(p, valid, findings, traces=count, truncated=dropped)


def _validate_stdin(max_findings: int) -> ValidationResult:
    """Standard input, in the format ``stdin_copy`` reads from its content."""
    with stdin_copy() as f:
        r = validate_path(f, max_findings=max_findings)
    for x in r.findings:
        x.path = "-"
    return msgspec.structs.replace(r, path="-")


_EVENT_REC, _EDGE_REC = b'{"rec":"event"', b'{"rec":"edge"'


def _check_log_fast(p: str, budget: int) -> tuple[list[Finding], int] | None:
    """An event log checked on structs (memory ~ structs, not dicts; no Python work per field);
    None when any line needs a closer look, and the dict path then reports everything with its line."""
    log = read_log_structs(p)
    checked = None if log is None else check_log_structs(log, p, budget)
    return None if checked is None else (checked.sink.items, checked.sink.dropped)


class LogStructs(msgspec.Struct):
    """An event log's records as structs: header and updates merged into ``top`` (dicts, as the
    dict path reads them), events and edges with the line each came from."""

    top: dict[str, Any]
    events: list[VEvent]
    edges: list[Any]
    event_lines: list[int]
    edge_lines: list[int]
    longest: int  # the longest line's length


def read_log_structs(p: str) -> LogStructs | None:
    """An event log read in blocks, each run of event (or edge) lines decoded into structs by
    one call. None when any line needs a closer look (a bad record, a truncated tail, an
    unknown field, a duplicate key); ``LoadError`` when the stream cannot be read."""
    top: dict[str, Any] = {}
    events: list[Any] = []
    edges: list[Any] = []
    ev_lines: list[int] = []
    ed_lines: list[int] = []
    headers = 0
    longest = 0
    for first, block, lines in _line_blocks(p):
        longest = max(longest, *map(len, lines))
        if needs_exact_check(block):
            return None  # parse_json, on the dict path, enforces the integer range
        i, end = 0, len(lines)
        while i < end:
            line = lines[i]
            edge = line.startswith(_EDGE_REC)
            if edge or line.startswith(_EVENT_REC):
                prefix = _EDGE_REC if edge else _EVENT_REC
                j = i + 1
                while j < end and lines[j].startswith(prefix):
                    j += 1
                objs = decode_records(lines[i:j], edge=edge)
                if objs is None:
                    return None
                (edges if edge else events).extend(objs)
                (ed_lines if edge else ev_lines).extend(range(first + i, first + j))
                i = j
                continue
            i += 1
            if not line.strip():
                continue
            try:
                rec = parse_json(line, path=p, line=first + i - 1)
            except LoadError:
                return None
            if (
                type(rec) is not dict
                or rec.get("rec") not in ("header", "update")
                or find_duplicate_key(line, rec)
            ):
                return None
            headers += rec.pop("rec") == "header"
            merge_log_header(top, rec)
    if headers != 1 or "events" in top or "edges" in top:
        return None
    return LogStructs(top, events, edges, ev_lines, ed_lines, longest)


class StructCheck(NamedTuple):
    """The findings on a trace read as structs, with its event index and its edges' endpoints
    as event positions (which a loader reuses rather than look every id up again)."""

    sink: _Sink
    index: dict[str, int]
    src: np.ndarray
    dst: np.ndarray


def check_log_structs(log: LogStructs, p: str, budget: int = DEFAULT_MAX_FINDINGS) -> StructCheck | None:
    """Every rule on an event log read as structs; None when its ids or edge endpoints need the
    dict path."""
    cols = columns_of(log.events, log.edges)
    if cols is None:
        return None
    top = {**log.top, "events": log.events, "edges": log.edges}
    top.setdefault("rewards", {})
    if "costs" not in top:
        top["_derived_costs"] = True
    raw = RawTrace(
        None, p, event_lines=log.event_lines, edge_lines=log.edge_lines, large=log.longest > MAX_STRING_CHARS
    )
    sink = _Sink(raw, budget)
    _check(top, sink, prepared=cols)
    return StructCheck(sink, cols[0], cols[-2], cols[-1])


def _line_blocks(p: str, size: int = 1 << 22) -> Iterator[tuple[int, bytes, list[bytes]]]:
    """(number of its first line, the block, its lines without newlines) for blocks of whole
    lines of about ``size`` bytes; ``LoadError`` when the (compressed) stream cannot be read."""
    f = open_read(p)
    try:
        n, rest = 1, b""
        while True:
            try:
                chunk = f.read(size)
            except Exception as e:  # gzip, zstd: corrupt or truncated; the dict path says where
                raise LoadError("OT007", f"corrupt or truncated compressed data ({e})", path=p) from None
            if not chunk:
                break
            chunk = rest + chunk
            cut = chunk.rfind(b"\n") + 1
            block, rest = chunk[:cut], chunk[cut:]
            if block:
                lines = block.split(b"\n")
                lines.pop()  # empty: after the last newline
                yield n, block, lines
                n += len(lines)
        if rest:
            yield n, rest, [rest]
    finally:
        f.close()


def _check_doc(
    doc: tuple[bytes, int | None], path: str, budget: int
) -> tuple[list[Finding], int, str | None]:
    """Struct fast path for a clean trace; the dict path (every finding, pointers) otherwise.
    Also the trace's id when it has one (a string)."""
    data, line = doc
    text = data[3:] if data[:3] == b"\xef\xbb\xbf" else data  # parse_json drops one BOM too
    tr = None if needs_exact_check(text) else decode_clean(text)
    checked = (
        None
        if tr is None
        else check_structs(tr, path, line=line, large=may_hold_long_string(text), budget=budget)
    )
    if checked is not None:
        return checked.sink.items, checked.sink.dropped, tr.trace_id  # type: ignore[union-attr]
    try:
        parsed = parse_json(data, path=path, line=line)
    except LoadError as e:  # counted against the file's budget like any finding
        return ([e.finding()], 0, None) if budget > 0 else ([], 1, None)
    raw = RawTrace(parsed, path, line=line, large=len(data) > MAX_STRING_CHARS)
    if dup := find_duplicate_key(data, parsed):
        raw.duplicates.append((dup[0], dup[1], line))
    items, more = check_raw(raw, max_findings=budget)
    tid = parsed.get("trace_id") if type(parsed) is dict else None
    return items, more, tid if type(tid) is str else None


def _content_digest(data: bytes) -> bytes:
    """What ingest compares two traces of one id by: the content, whatever the key order."""
    try:
        value = orjson.loads(data[3:] if data[:3] == b"\xef\xbb\xbf" else data)
    except orjson.JSONDecodeError:
        return data
    import hashlib  # only when an id repeats: 5-10 ms of every validate's start-up otherwise

    return hashlib.blake2b(orjson.dumps(value, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def _repeated_ids(p: str, fmt: str, repeats: list[tuple[str, int | None, int | None]]) -> list[Finding]:
    """Warnings for a trace id met again in one file: with other content (OT215) ingest refuses
    the second trace (OT310) while every other reader takes both, hence a warning and not an
    error (one verdict for every reader); the same content (OT216) is stored and measured once.
    The traces concerned are read again in one more pass, only when some id repeats."""
    if not repeats:
        return []
    wanted = {x for _, first, line in repeats for x in (first, line)}
    digests = {line: _content_digest(data) for data, line in iter_docs(p, fmt) if line in wanted}
    out = []
    for tid, first, line in repeats:
        if digests.get(first) == digests.get(line):
            code, msg = (
                "OT216",
                f"the trace of line {first} again (id {_short(tid)}): stored and measured once",
            )
        else:
            code = "OT215"
            msg = (
                f"trace id {_short(tid)} is also line {first}'s, whose content differs: ingest refuses "
                "this trace (OT310); give it another id"
            )
        out.append(
            Finding(code=code, severity="warning", message=msg, pointer="/trace_id", line=line, path=p)
        )
    return out


def check_structs(
    tr: VTrace, path: str, *, line: int | None = None, large: bool, budget: int = DEFAULT_MAX_FINDINGS
) -> StructCheck | None:
    """The rules ``decode_clean`` leaves to Python (ids, edges, time, spawns, limits) on a trace
    it accepted; None when its ids or edge endpoints need the dict path. ``large``: the text was
    long enough to hold a string past the limit."""
    cols = columns(tr)
    if cols is None:
        return None
    sink = _Sink(RawTrace(None, path, line=line, large=large), budget)
    _check_graph(tr.events, *cols, sink)
    _check_limits(tr.metadata or None, tr.events, sink)
    return StructCheck(sink, cols[0], cols[-2], cols[-1])


def validate_trace(trace: Any) -> list[Finding]:
    """Validate an in-memory Trace (or trace dict)."""
    from .model import Trace, trace_to_dict

    d = trace_to_dict(trace) if isinstance(trace, Trace) else trace
    items, _ = check_raw(RawTrace(d, "<memory>"))
    return items


def validate_json(data: bytes) -> list[Finding]:
    """Validate one trace's JSON text, e.g. a trace an importer built, as it will be written:
    the struct fast path when it is clean (a fraction of ``validate_trace``'s time), the dict
    path with every finding otherwise."""
    items, _, _ = _check_doc((data, None), "<memory>", DEFAULT_MAX_FINDINGS)
    return items


def iter_validation(paths: list[str], **kw: Any) -> Iterator[ValidationResult]:
    for p in paths:
        yield validate_path(p, **kw)
