"""The fast path of loading: a clean ``.json`` or ``.events.jsonl`` trace decoded by validation's
structs (``fastcheck``), checked on them, then turned into a ``Trace`` without a dict per event.

A million-event trace as orjson dicts takes about 2.8 GB; as structs, with the strings events
repeat (agents, roles, tools, models, edge endpoints) shared, a third of that. Anything the
struct path does not accept, or any error it finds, returns None: ``io`` then loads the file
through dicts, which reports every finding with its pointer, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET

from .errors import LoadError
from .fastcheck import VEvent, VTrace, decode_clean
from .limits import may_hold_long_string, needs_exact_check
from .model import Edge, Event, Trace, derived_costs, trace_of
from .read import read_bytes, split_format
from .validate import StructCheck, check_log_structs, check_structs, read_log_structs

_BOM = b"\xef\xbb\xbf"
_STEP = 20_000  # events converted per slice: the structs they replace are freed as it goes
_TOP_FIELDS: Final = tuple(f for f in VTrace.__struct_fields__ if f not in ("events", "edges"))


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
    return trace_of_structs(tr, checked)


def trace_of_structs(tr: VTrace, checked: StructCheck) -> Trace:
    """The Trace of a trace read as structs and checked clean; its event and edge lists are
    converted in place."""
    top = {k: v for k in _TOP_FIELDS if (v := getattr(tr, k)) is not UNSET}
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
    tr = trace_of(top, evs, _to_edges(edges, checked))
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
    one = _MAKE_CONVERTER(names.setdefault)
    out: list[Any] = events
    for i in range(0, len(out), _STEP):
        out[i : i + _STEP] = list(map(one, out[i : i + _STEP]))
    return out


#: Event fields whose values repeat from event to event (names): each distinct value is kept once.
_REPEATED_NAMES: Final = frozenset(("agent", "role", "from", "to", "tool", "parent", "model"))


def _converter_source() -> str:
    """The source of the VEvent -> Event conversion, one keyword per field of ``model.Event``.

    Written out from the field table rather than looped over at run time: a loop over the fields
    per event takes twice the time (1M events: 3.3 s against 1.6 s), and this is on every load."""
    args = []
    for f in msgspec.structs.fields(Event):
        if f.name == "extra":  # unknown fields never take this path (the key count refuses them)
            continue
        value = f"share(e.{f.name}, e.{f.name})" if f.encode_name in _REPEATED_NAMES else f"e.{f.name}"
        args.append(f"{f.name}={value}" if f.required else f"{f.name}=None if e.{f.name} is u else {value}")
    return (
        "def make_converter(share):\n"
        "    def one(e):\n"
        f"        return Event({', '.join(args)})\n"
        "    return one\n"
    )


def _compile_converter() -> Callable[[Callable[[str, str], str]], Callable[[VEvent], Event]]:
    scope: dict[str, Any] = {"Event": Event, "u": UNSET}
    exec(compile(_converter_source(), f"<{__name__} converter>", "exec"), scope)  # noqa: S102
    return scope["make_converter"]  # type: ignore[no-any-return]


_MAKE_CONVERTER: Final = _compile_converter()
