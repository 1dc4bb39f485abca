"""The fast path of loading: a clean ``.json`` or ``.events.jsonl`` trace decoded by validation's
structs (``fastcheck``), checked on them, then turned into a ``Trace`` without a dict per event.

A million-event trace as orjson dicts takes about 2.8 GB; as structs, with the strings events
repeat (agents, roles, tools, models, edge endpoints) shared, a third of that. Anything the
struct path does not accept, or any error it finds, returns None: ``io`` then loads the file
through dicts, which reports every finding with its pointer, as before.
"""

from __future__ import annotations

from typing import Any

from msgspec import UNSET

from .errors import LoadError
from .fastcheck import VEvent, decode_clean
from .limits import may_hold_long_string, needs_exact_check
from .model import Edge, Event, Trace, derived_costs
from .read import read_bytes, split_format
from .validate import StructCheck, check_log_structs, check_structs, read_log_structs

_BOM = b"\xef\xbb\xbf"
_STEP = 20_000  # events converted per slice: the structs they replace are freed as it goes


def load_clean(path: str) -> Trace | None:
    """The trace of a clean ``.json`` or ``.events.jsonl`` file (its validation found no error),
    else None (another format, or anything for the dict path to report)."""
    if path == "-":  # stdin reads once: the dict path, which can report findings, must have it
        return None
    fmt, _ = split_format(path)
    try:
        if fmt == "json":
            return _load_json(path)
        if fmt == "events":
            return _load_log(path)
    except LoadError:  # unreadable: the dict path raises the same error, with its line
        return None
    return None


def _load_json(path: str) -> Trace | None:
    data = read_bytes(path)
    if data[:3] == _BOM:  # parse_json drops one too
        data = data[3:]
    if needs_exact_check(data):
        return None
    tr = decode_clean(data)
    large = may_hold_long_string(data)
    del data  # the structs hold everything: free the text before the checks allocate
    if tr is None:
        return None
    checked = check_structs(tr, path, large=large)
    if checked is None or checked.sink.errors:
        return None
    top = {
        k: v
        for k in (
            "trace_id",
            "task_id",
            "rewards",
            "costs",
            "system",
            "topology",
            "metrics",
            "schema_version",
        )
        if (v := getattr(tr, k)) is not UNSET
    }
    if tr.metadata is not UNSET:
        top["metadata"] = tr.metadata
    return _trace(top, tr.events, tr.edges, checked)


def _load_log(path: str) -> Trace | None:
    log = read_log_structs(path)
    if log is None:
        return None
    checked = check_log_structs(log, path)
    if checked is None or checked.sink.errors:
        return None
    log.event_lines.clear()  # only findings needed the lines: free them before converting
    log.edge_lines.clear()
    return _trace(log.top, log.events, log.edges, checked)


def _trace(top: dict[str, Any], events: list[VEvent], edges: list[Any], checked: StructCheck) -> Trace:
    """The Trace the dict path builds from the same fields (``read.raw_to_trace``); ``events``
    and ``edges`` are converted in place."""
    evs = to_events(events)
    tr = Trace(
        trace_id=top["trace_id"],
        task_id=top["task_id"],
        events=evs,
        edges=_to_edges(edges, checked),
        rewards=dict(top.get("rewards") or {}),
        costs=dict(top.get("costs") or {}),
        system=top.get("system"),
        topology=top.get("topology"),
        metrics=top.get("metrics"),
        schema_version=top.get("schema_version"),
        metadata=top.get("metadata"),
    )
    if "costs" not in top:  # an event log whose header and updates carry none
        tr.costs = derived_costs(evs)
    return tr


def _to_edges(edges: list[Any], checked: StructCheck) -> list[Edge]:
    """Edge structs as ``Edge``s, slice by slice in the same list; the endpoints are the event
    ids' own strings, found by the positions validation looked up."""
    ids = list(checked.index)
    out: list[Any] = edges
    for i in range(0, len(out), _STEP):
        ends = zip(checked.src[i : i + _STEP].tolist(), checked.dst[i : i + _STEP].tolist(), strict=True)
        out[i : i + _STEP] = [
            Edge(ids[s], ids[d], x.type) for (s, d), x in zip(ends, out[i : i + _STEP], strict=True)
        ]
    return out


def to_events(events: list[VEvent]) -> list[Event]:
    """Validation's event structs as ``Event``s, converted slice by slice in the same list (so
    the two never coexist whole); absent fields become None, repeated names one shared string."""
    names: dict[str, str] = {}
    share = names.setdefault
    u = UNSET

    def one(e: VEvent) -> Event:
        return Event(
            id=e.id,
            t=e.t,
            type=e.type,
            agent=share(e.agent, e.agent),
            role=None if e.role is u else share(e.role, e.role),
            from_=None if e.from_ is u else share(e.from_, e.from_),
            to=None if e.to is u else share(e.to, e.to),
            tool=None if e.tool is u else share(e.tool, e.tool),
            content_ref=None if e.content_ref is u else e.content_ref,
            trusted=None if e.trusted is u else e.trusted,
            t_end=None if e.t_end is u else e.t_end,
            parent=None if e.parent is u else share(e.parent, e.parent),
            call_id=None if e.call_id is u else e.call_id,
            turn=None if e.turn is u else e.turn,
            tokens_in=None if e.tokens_in is u else e.tokens_in,
            tokens_out=None if e.tokens_out is u else e.tokens_out,
            cost_usd=None if e.cost_usd is u else e.cost_usd,
            model=None if e.model is u else share(e.model, e.model),
            content=None if e.content is u else e.content,
            status=None if e.status is u else e.status,
            attrs=None if e.attrs is u else e.attrs,
            credit=None if e.credit is u else e.credit,
        )

    out: list[Any] = events
    for i in range(0, len(out), _STEP):
        out[i : i + _STEP] = list(map(one, out[i : i + _STEP]))
    return out
