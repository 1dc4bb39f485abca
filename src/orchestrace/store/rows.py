"""Turning trace files into table rows (pure, picklable: runs locally or in a Ray task).

Rows are built column-wise from the decoded JSON objects, not from per-event structs, because
ingest speed is bound by this loop. A trace becomes rows only after it validates with zero
errors; a trace that does not becomes a ``Failure`` the writer reports, skips or aborts on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from functools import partial
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

import msgspec
import numpy as np
import orjson

from ..core.errors import Finding, LoadError
from ..core.fastcheck import VEvent, VTrace, decode_structs, kept_every_key
from ..core.fastload import trace_of_structs
from ..core.limits import may_hold_long_string, needs_exact_check
from ..core.model import EVENT_FIELD_TYPES, TRACE_HEADER_FIELDS, Trace
from ..core.paths import utf8_path
from ..core.read import (
    Piece,
    RawTrace,
    iter_docs,
    iter_raw,
    iter_span_docs,
    raw_of_doc,
    raw_to_trace,
    split_format,
)
from ..core.validate import StructCheck, check_raw, check_structs
from .schema import DERIVED_TABLES, EVENT_COLUMNS, ROW_EXTRA, TABLES

EVENT_COLUMN_TO_FIELD: dict[str, str] = {c: f for f, c in EVENT_COLUMNS.items()}
_KNOWN = frozenset(EVENT_FIELD_TYPES)
#: events column -> the VEvent attribute holding it
_STRUCT_ATTR: dict[str, str] = {
    EVENT_COLUMNS[f.encode_name]: f.name
    for f in msgspec.structs.fields(VEvent)
    if f.encode_name in EVENT_COLUMNS
}
_U = msgspec.UNSET
_BOM = b"\xef\xbb\xbf"
_SORTED = msgspec.json.Encoder(order="sorted")
#: the end of a number with a positive exponent in msgspec's compact output, where orjson writes
#: a '+' (1e+16, msgspec 1e16). A string may match too: either way the trace takes the dict path.
_POS_EXPONENT = re.compile(rb"e\d+[,\]}]")
_HEADER_KEYS = tuple(k for k in TRACE_HEADER_FIELDS if k != "trace_id")
_DATE_KEYS = ("t0_unix", "date", "started_at", "start_time", "created_at", "timestamp")
#: NumPy dtypes of the SQL types that have one; the others are handed over as Python objects
_NUMPY: dict[str, type] = {"DOUBLE": np.float64, "INTEGER": np.int64, "BIGINT": np.int64, "BOOLEAN": np.bool_}


class Failure(msgspec.Struct):
    """A trace (or an unreadable part of a file) that was not ingested, with every finding."""

    path: str
    line: int | None
    trace_id: str | None
    findings: list[Finding]

    def first(self) -> Finding:
        return next((f for f in self.findings if f.severity == "error"), self.findings[0])


class Chunk(msgspec.Struct):
    """Rows of some whole traces of one file (table name -> column name -> ``column``), plus
    failures and the (trace id, digest) of traces left out because the store holds them already."""

    path: str
    tables: dict[str, dict[str, np.ndarray]]
    failures: list[Failure]
    n_traces: int
    n_events: int
    unchanged: list[tuple[str, str]] = msgspec.field(default_factory=list)


#: trace id -> (digest, measured) of what a store holds; a trace matching it needs no rows.
Known = dict[str, tuple[str, bool]]


def is_unchanged(known: Known | None, tid: str, dig: str, measure: bool) -> bool:
    """The store holds this content already (with measure metrics, if they are asked for)."""
    k = (known or {}).get(tid)
    return k is not None and k[0] == dig and (k[1] or not measure)


def digest(data: dict[str, Any]) -> str:
    """Content hash of a decoded trace: same content, same digest, whatever the key order."""
    return hashlib.blake2b(orjson.dumps(data, option=orjson.OPT_SORT_KEYS), digest_size=16).hexdigest()


def _digest_of(raw: RawTrace) -> str:
    """``digest(raw.data)``, from the sorted dump the reader made when it has one."""
    if raw.canonical is None:
        return digest(raw.data)
    return hashlib.blake2b(raw.canonical, digest_size=16).hexdigest()


def trace_date(meta: Any, today: dt.date) -> dt.date:
    """The partition date, the day the trace started (UTC), from its ``metadata``: ``t0_unix``
    (what importers record), else an ISO date/time or epoch seconds under a usual key, else
    ``today`` (the ingest day, for traces that do not say when they ran, e.g. generated ones)."""
    if isinstance(meta, dict):
        for k in _DATE_KEYS:
            v = meta.get(k)
            try:
                if isinstance(v, str) and len(v) >= 10:
                    return dt.date.fromisoformat(v[:10])
                if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 4e9:
                    return dt.datetime.fromtimestamp(v, dt.UTC).date()
            except ValueError:
                continue
    return today


class _Columns:
    """Per-table column lists that grow trace by trace."""

    def __init__(self) -> None:
        self.cols = {
            name: {c: [] for c, _ in _row_columns(name)} for name in TABLES if name not in DERIVED_TABLES
        }
        self.n_traces = 0
        self.n_events = 0

    def tables(self) -> dict[str, dict[str, np.ndarray]]:
        return {
            name: {
                c: column(vals, ty) for (c, ty), vals in zip(_row_columns(name), cols.values(), strict=True)
            }
            for name, cols in self.cols.items()
        }


def _row_columns(table: str) -> tuple[tuple[str, str], ...]:
    """(column, type) of the rows prepared for ``table``: its own columns, then ``ROW_EXTRA``."""
    return TABLES[table] + ROW_EXTRA.get(table, ())


def column(vals: list[Any], sql_type: str = "VARCHAR") -> np.ndarray:
    """A column for DuckDB's scan of NumPy arrays. Numbers and booleans are typed arrays (DOUBLE's
    None is NaN, which DuckDB reads as NULL: a valid trace holds no NaN, JSON cannot; an integer
    or boolean column with a None is a masked array): DuckDB would type a column of Python ints
    from its first 1,000 rows and refuse a larger value after them. Strings, dates and times are
    Python objects, which it converts itself. Arrow arrays (``pa.array``) cost as much to build
    and import pandas on first use (0.25-0.4 s)."""
    dtype = _NUMPY.get(sql_type)
    if dtype is None:  # (fromiter: no looking into each value for a nested sequence)
        return np.fromiter(vals, dtype=object, count=len(vals))
    if dtype is np.float64 or None not in vals:
        return np.array(vals, dtype=dtype)
    as_float = np.array(vals, dtype=np.float64)  # None is NaN
    missing = np.isnan(as_float)
    if dtype is np.bool_ or np.abs(as_float[~missing]).max(initial=0) < 2**53:
        values = np.where(missing, 0, as_float).astype(dtype)
    else:  # integers past 2**53 would lose digits as floats
        values = np.array([0 if v is None else v for v in vals], dtype=dtype)
    return np.ma.array(values, mask=missing)


def _json(v: Any) -> str | None:
    return None if v is None else orjson.dumps(v).decode()


def add_trace(
    cols: _Columns,
    data: dict[str, Any],
    *,
    source: str,
    dig: str,
    today: dt.date,
    now: dt.datetime,
    measured: Measured | None = None,
) -> None:
    """Append one validated trace (decoded JSON object) to the column lists."""
    tid = data["trace_id"]
    events: list[dict[str, Any]] = data["events"]
    edges: list[dict[str, Any]] = data["edges"]
    n = len(events)
    c = cols.cols
    tr = c["traces"]
    tr["trace_id"].append(tid)
    for k in ("task_id", "system", "topology", "schema_version"):
        tr[k].append(data.get(k))
    tr["date"].append(trace_date(data.get("metadata"), today))
    tr["n_events"].append(n)
    tr["n_edges"].append(len(edges))
    tr["digest"].append(dig)
    tr["measured"].append(measured is not None)
    tr["source"].append(source)
    tr["ingested_at"].append(now)
    tr["header"].append(_json({k: data[k] for k in _HEADER_KEYS if k in data}))

    ev = c["events"]
    ev["trace_id"].extend([tid] * n)
    ev["idx"].extend(range(n))
    for field, col in EVENT_COLUMNS.items():
        ev[col].extend(map(dict.get, events, repeat(field, n)))
    ev["attrs"].extend(map(_json, map(dict.get, events, repeat("attrs", n))))
    ev["extra"].extend(
        [
            None if e.keys() <= _KNOWN else _json({k: v for k, v in e.items() if k not in _KNOWN})
            for e in events
        ]
    )
    _add_measured(ev, n, measured)

    ed = c["edges"]
    ed["trace_id"].extend([tid] * len(edges))
    ed["idx"].extend(range(len(edges)))
    for k in ("src", "dst", "type"):
        ed[k].extend(map(dict.__getitem__, edges, repeat(k, len(edges))))

    credits = [(i, e["id"], credit) for i, e in enumerate(events) if (credit := e.get("credit"))]
    _add_maps(
        cols,
        tid,
        data.get("rewards"),
        credits,
        data.get("metrics"),
        data.get("costs"),
        measured.metrics if measured else None,
    )
    cols.n_traces += 1
    cols.n_events += n


def add_struct_trace(
    cols: _Columns,
    tr: VTrace,
    *,
    source: str,
    dig: str,
    today: dt.date,
    now: dt.datetime,
    measured: Measured | None = None,
) -> None:
    """``add_trace`` of a trace read as structs (``fastcheck.decode_clean``): the same rows,
    pulled attribute by attribute. Such a trace has no unknown event field (no ``extra``)."""
    tid = tr.trace_id
    events, edges = tr.events, tr.edges
    n = len(events)
    c = cols.cols
    rows = c["traces"]
    rows["trace_id"].append(tid)
    for k in ("task_id", "system", "topology", "schema_version"):
        v = getattr(tr, k)
        rows[k].append(None if v is _U else v)
    meta = None if tr.metadata is _U else tr.metadata
    rows["date"].append(trace_date(meta, today))
    rows["n_events"].append(n)
    rows["n_edges"].append(len(edges))
    rows["digest"].append(dig)
    rows["measured"].append(measured is not None)
    rows["source"].append(source)
    rows["ingested_at"].append(now)
    header = {k: v for k in _HEADER_KEYS if (v := getattr(tr, k)) is not _U}
    rows["header"].append(_json(header))

    ev = c["events"]
    ev["trace_id"].extend([tid] * n)
    ev["idx"].extend(range(n))
    for col, attr in _STRUCT_ATTR.items():
        ev[col].extend([None if v is _U else v for v in map(attrgetter(attr), events)])
    ev["attrs"].extend([None if a is _U else _json(a) for a in map(attrgetter("attrs"), events)])
    ev["extra"].extend([None] * n)
    _add_measured(ev, n, measured)

    ed = c["edges"]
    ed["trace_id"].extend([tid] * len(edges))
    ed["idx"].extend(range(len(edges)))
    for k in ("src", "dst", "type"):
        ed[k].extend(map(attrgetter(k), edges))

    credits = [(i, e.id, e.credit) for i, e in enumerate(events) if e.credit]
    metrics = None if tr.metrics is _U else tr.metrics
    _add_maps(cols, tid, tr.rewards, credits, metrics, tr.costs, measured.metrics if measured else None)
    cols.n_traces += 1
    cols.n_events += n


def _add_measured(ev: dict[str, list[Any]], n: int, measured: Measured | None) -> None:
    """The events' ``critical`` flags and busy seconds (``_busy``): None without measure."""
    if measured is None:
        ev["critical"].extend([None] * n)
        ev["_busy"].extend([None] * n)
        return
    flags = [False] * n
    for i in measured.critical:
        flags[i] = True
    ev["critical"].extend(flags)
    ev["_busy"].extend(measured.busy.tolist())


def _add_maps(
    cols: _Columns,
    tid: str,
    rewards: Any,
    credits: list[tuple[int, str, dict[str, Any]]],
    metrics: Any,
    costs: Any,
    measured: dict[str, Any] | None,
) -> None:
    """The rewards, credits and metrics rows of one trace; ``credits``: (event position, id,
    credit map) of the events that carry one."""
    c = cols.cols
    rw = c["rewards"]
    for ch, v in (rewards or {}).items():
        rw["trace_id"].append(tid)
        rw["channel"].append(ch)
        rw["value"].append(float(v))

    cr = c["credits"]
    for i, eid, credit in credits:
        for j, (ch, v) in enumerate(credit.items()):
            cr["trace_id"].append(tid)
            cr["event_idx"].append(i)
            cr["event_id"].append(eid)
            cr["ord"].append(j)
            cr["channel"].append(ch)
            cr["value"].append(float(v))

    me = c["metrics"]
    for src, m in (("recorded", metrics), ("costs", costs), ("measure", measured)):
        for name, v in (m or {}).items():
            if isinstance(v, bool | int | float):
                me["trace_id"].append(tid)
                me["source"].append(src)
                me["name"].append(name)
                me["value"].append(float(v))


class Measured(NamedTuple):
    """What ingest stores of ``measure`` for one trace."""

    metrics: dict[str, Any]  # ``measure.analyze``
    critical: list[int]  # the events on its wall-clock critical path
    busy: np.ndarray  # each event's busy seconds, as ``analyze --by agent`` sums them per agent


def measure_trace(tr: Trace) -> Measured:
    """``orchestrace.measure`` of one trace, on one view: its metrics, critical path and busy time."""
    from ..measure import TraceView, analyze, critical_path

    v = TraceView(tr)
    result = analyze(v)
    return Measured(result, list(critical_path(v)["path"]), v.busy_time)


def _stored_already(raw: RawTrace, known: Known | None, measure: bool) -> tuple[str, str] | None:
    """(id, digest) when the store holds exactly this content: it validated when it was stored,
    so re-ingesting skips validation too. Event logs (costs derived after validation) and
    anything that did not even parse cleanly take the full path."""
    d = raw.data
    if not known or not isinstance(d, dict) or raw.log_errors or raw.duplicates or "_derived_costs" in d:
        return None
    tid = d.get("trace_id")
    if not isinstance(tid, str) or tid not in known:
        return None
    try:
        dig = _digest_of(raw)
    except orjson.JSONEncodeError:  # nested past the writer's limit: never stored, so validate it
        return None
    return (tid, dig) if is_unchanged(known, tid, dig, measure) else None


def _failure(raw: RawTrace, findings: list[Finding]) -> Failure:
    tid = raw.data.get("trace_id") if isinstance(raw.data, dict) else None
    return Failure(raw.path, raw.line, tid if isinstance(tid, str) else None, findings)


class _Ready(NamedTuple):
    """A valid trace: its id, its digest, and what appends its rows (None: the store holds it)."""

    tid: str
    dig: str
    add: Callable[[_Columns], None] | None


class _Rows(NamedTuple):
    """What rows of a trace need besides the trace itself."""

    source: str
    today: dt.date
    now: dt.datetime
    measure: bool
    known: Known | None


def _from_raw(raw: RawTrace, r: _Rows) -> Failure | _Ready:
    """The dict path: every finding of an invalid trace, with its pointer."""
    if (hit := _stored_already(raw, r.known, r.measure)) is not None:
        return _Ready(*hit, None)
    findings, _ = check_raw(raw)
    if any(f.severity == "error" for f in findings):
        return _failure(raw, findings)
    if "_derived_costs" in raw.data:  # the data changes here: its dump no longer holds
        raw.canonical = None
    if raw.data.pop("_derived_costs", False):
        raw.data["costs"] = raw_to_trace(msgspec.structs.replace(raw, data=dict(raw.data))).costs
    tid, dig = raw.data["trace_id"], _digest_of(raw)
    if is_unchanged(r.known, tid, dig, r.measure):
        return _Ready(tid, dig, None)

    def add(cols: _Columns) -> None:
        if r.measure:
            measured = measure_trace(raw_to_trace(msgspec.structs.replace(raw, data=dict(raw.data))))
        else:
            measured = None
        add_trace(
            cols,
            raw.data,
            source=r.source,
            dig=dig,
            today=r.today,
            now=r.now,
            measured=measured,
        )

    return _Ready(tid, dig, add)


def _from_structs(doc: bytes, path: str, line: int | None, r: _Rows) -> _Ready | None:
    """The struct path for a clean trace (no Python dict per event, a third of the dict path's
    time); None sends the document to the dict path (anything unusual, any finding of error)."""
    text = doc[3:] if doc[:3] == _BOM else doc  # parse_json drops one BOM too
    tr = None if needs_exact_check(text) else decode_structs(text)
    if tr is None:
        return None
    canonical = _SORTED.encode(tr)  # the bytes of ``sorted_json`` of the dict path's data ...
    if _POS_EXPONENT.search(canonical) or not kept_every_key(text, canonical.count(b":")):
        return None  # ... but for a positive exponent's '+'; and a key was dropped: dict path
    tid, dig = tr.trace_id, hashlib.blake2b(canonical, digest_size=16).hexdigest()
    if is_unchanged(r.known, tid, dig, r.measure):  # validated when it was stored
        return _Ready(tid, dig, None)
    checked = check_structs(tr, path, line=line, large=may_hold_long_string(text))
    if checked is None or checked.sink.errors:
        return None
    return _Ready(tid, dig, partial(_add_structs, tr, checked, dig, r))


def _add_structs(tr: VTrace, checked: StructCheck, dig: str, r: _Rows, cols: _Columns) -> None:
    if r.measure:  # the Trace is made from copies of the lists, which it converts in place
        copy = msgspec.structs.replace(tr, events=list(tr.events), edges=list(tr.edges))
        measured = measure_trace(trace_of_structs(copy, checked))
    else:
        measured = None
    add_struct_trace(cols, tr, source=r.source, dig=dig, today=r.today, now=r.now, measured=measured)


def _prepared(piece: Piece, r: _Rows) -> Iterator[Failure | _Ready]:
    """Each trace of ``piece``: a failure, or ready to become rows. ``LoadError`` when the file
    (or a .json file's only document) cannot be read."""
    path = piece.path
    fmt, _ = split_format(path)
    if fmt == "events":
        for raw in iter_raw(path, check_duplicates=True, collect_errors=True, canonical=True):
            yield _from_raw(raw, r)
        return
    docs = (
        iter_docs(path, fmt)
        if piece.end is None
        else iter_span_docs(path, piece.start, piece.end, piece.first_line)
    )
    for doc, line in docs:
        ready = _from_structs(doc, path, line, r)
        if ready is None:
            raw = raw_of_doc(doc, path, line, collect_errors=True, canonical=True, check_duplicates=True)
            yield _from_raw(raw, r)
        else:
            yield ready


def iter_chunks(
    path: str | Piece,
    *,
    measure: bool = True,
    chunk_events: int = 200_000,
    known: Known | None = None,
    today: dt.date | None = None,
    now: dt.datetime | None = None,
) -> Iterator[Chunk]:
    """Rows of every valid trace of ``path`` (a file, or a piece of one) in chunks of about
    ``chunk_events`` events.

    An unreadable file yields one chunk holding only its failure; a line that does not parse
    fails alone and the next lines are still read.
    """
    piece = Piece(path) if isinstance(path, str) else path
    path = piece.path
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    # a file name that is not UTF-8: DuckDB's "cannot encode str", reported as a broken store
    r = _Rows(utf8_path(os.path.abspath(path)), today or now.date(), now, measure, known)
    cols, failures, same = _Columns(), [], []
    ids: set[str] = set()  # trace ids with rows in ``cols``: a chunk holds each id once
    try:
        for item in _prepared(piece, r):
            if isinstance(item, Failure):
                failures.append(item)
                continue
            if item.tid in ids:  # met again in this file: the writer must meet the earlier one
                # first (it stores a repeat once and refuses a different one, by id)
                yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)
                cols, failures, same, ids = _Columns(), [], [], set()
            if item.add is None:
                same.append((item.tid, item.dig))
                continue
            ids.add(item.tid)
            item.add(cols)
            if cols.n_events >= chunk_events:
                yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)
                cols, failures, same, ids = _Columns(), [], [], set()
    except LoadError as e:
        failures.append(Failure(path, e.line, None, [e.finding()]))
    yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)


def prepare_file(
    path: str | Piece,
    measure: bool = True,
    chunk_events: int = 200_000,
    known: Known | None = None,
    now: dt.datetime | None = None,
) -> list[Chunk]:
    """All chunks of one file, or piece of one, at once (what a worker process or a Ray task returns)."""
    return list(iter_chunks(path, measure=measure, chunk_events=chunk_events, known=known, now=now))
