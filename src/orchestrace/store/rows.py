"""Turning trace files into table rows (pure, picklable: runs locally or in a Ray task).

Rows are built column-wise from the decoded JSON objects, not from per-event structs, because
ingest speed is bound by this loop. A trace becomes rows only after it validates with zero
errors; a trace that does not becomes a ``Failure`` the writer reports, skips or aborts on.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
from collections.abc import Iterator
from itertools import repeat
from typing import Any

import msgspec
import orjson
import pyarrow as pa

from ..core.errors import Finding, LoadError
from ..core.model import EVENT_FIELD_TYPES
from ..core.read import RawTrace, iter_raw, raw_to_trace
from ..core.validate import check_raw
from .schema import EVENT_COLUMNS, TABLES

EVENT_COLUMN_TO_FIELD: dict[str, str] = {c: f for f, c in EVENT_COLUMNS.items()}
_KNOWN = frozenset(EVENT_FIELD_TYPES)
_HEADER_KEYS = ("schema_version", "task_id", "system", "topology", "rewards", "costs", "metrics", "metadata")
_DATE_KEYS = ("t0_unix", "date", "started_at", "start_time", "created_at", "timestamp")
_ARROW = {
    "VARCHAR": pa.string(),
    "JSON": pa.string(),
    "DOUBLE": pa.float64(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "BOOLEAN": pa.bool_(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
}
SCHEMAS: dict[str, pa.Schema] = {
    name: pa.schema([(c, _ARROW[t]) for c, t in cols]) for name, cols in TABLES.items()
}


class Failure(msgspec.Struct):
    """A trace (or an unreadable part of a file) that was not ingested, with every finding."""

    path: str
    line: int | None
    trace_id: str | None
    findings: list[Finding]

    def first(self) -> Finding:
        return next((f for f in self.findings if f.severity == "error"), self.findings[0])


class Chunk(msgspec.Struct):
    """Rows of some whole traces of one file (Arrow tables keyed by table name), plus failures
    and the (trace id, digest) of traces left out because the store holds them already."""

    path: str
    tables: dict[str, Any]
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


def trace_date(data: dict[str, Any], today: dt.date) -> dt.date:
    """The partition date, the day the trace started (UTC): ``metadata.t0_unix`` (what importers
    record), else an ISO date/time or epoch seconds under a usual metadata key, else ``today``
    (the ingest day, for traces that do not say when they ran, e.g. generated ones)."""
    meta = data.get("metadata")
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
        self.cols = {name: {c: [] for c, _ in cols} for name, cols in TABLES.items() if name != "agents"}
        self.n_traces = 0
        self.n_events = 0

    def tables(self) -> dict[str, pa.Table]:
        return {name: pa.table(cols, schema=SCHEMAS[name]) for name, cols in self.cols.items()}


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
    measured: dict[str, Any] | None = None,
    critical: list[int] | None = None,
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
    tr["date"].append(trace_date(data, today))
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
    if critical is None:
        ev["critical"].extend([None] * n)
    else:
        flags = [False] * n
        for i in critical:
            flags[i] = True
        ev["critical"].extend(flags)

    ed = c["edges"]
    ed["trace_id"].extend([tid] * len(edges))
    ed["idx"].extend(range(len(edges)))
    for k in ("src", "dst", "type"):
        ed[k].extend(map(dict.__getitem__, edges, repeat(k, len(edges))))

    rw = c["rewards"]
    for ch, v in (data.get("rewards") or {}).items():
        rw["trace_id"].append(tid)
        rw["channel"].append(ch)
        rw["value"].append(float(v))

    cr = c["credits"]
    for i, e in enumerate(events):
        credit = e.get("credit")
        if credit:
            for j, (ch, v) in enumerate(credit.items()):
                cr["trace_id"].append(tid)
                cr["event_idx"].append(i)
                cr["event_id"].append(e["id"])
                cr["ord"].append(j)
                cr["channel"].append(ch)
                cr["value"].append(float(v))

    me = c["metrics"]
    for src, m in (("recorded", data.get("metrics")), ("costs", data.get("costs")), ("measure", measured)):
        for name, v in (m or {}).items():
            if isinstance(v, bool | int | float):
                me["trace_id"].append(tid)
                me["source"].append(src)
                me["name"].append(name)
                me["value"].append(float(v))
    cols.n_traces += 1
    cols.n_events += n


def measure_trace(raw: RawTrace) -> tuple[dict[str, Any], list[int]]:
    """``orchestrace.measure.analyze`` of one trace, and the events on its wall-clock critical path."""
    from ..measure import TraceView, analyze, critical_path

    tr = raw_to_trace(msgspec.structs.replace(raw, data=dict(raw.data)))
    v = TraceView(tr)
    result = analyze(v)
    return result, list(critical_path(v)["path"])


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


def iter_chunks(
    path: str,
    *,
    measure: bool = True,
    chunk_events: int = 200_000,
    known: Known | None = None,
    today: dt.date | None = None,
    now: dt.datetime | None = None,
) -> Iterator[Chunk]:
    """Rows of every valid trace of ``path`` in chunks of about ``chunk_events`` events.

    An unreadable file yields one chunk holding only its failure; a line that does not parse
    fails alone and the next lines are still read.
    """
    now = now or dt.datetime.now(dt.UTC).replace(tzinfo=None)
    today = today or now.date()
    source = os.path.abspath(path)
    cols, failures, same = _Columns(), [], []
    ids: set[str] = set()  # trace ids with rows in ``cols``: a chunk holds each id once
    try:
        for raw in iter_raw(path, check_duplicates=True, collect_errors=True, canonical=True):
            if (hit := _stored_already(raw, known, measure)) is not None:
                if hit[0] in ids:  # the writer must meet the earlier one first
                    yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)
                    cols, failures, same, ids = _Columns(), [], [], set()
                same.append(hit)
                continue
            findings, _ = check_raw(raw)
            if any(f.severity == "error" for f in findings):
                failures.append(_failure(raw, findings))
                continue
            if "_derived_costs" in raw.data:  # the data changes here: its dump no longer holds
                raw.canonical = None
            if raw.data.pop("_derived_costs", False):
                raw.data["costs"] = raw_to_trace(msgspec.structs.replace(raw, data=dict(raw.data))).costs
            tid, dig = raw.data["trace_id"], _digest_of(raw)
            if tid in ids:  # met again in this file: its rows go in the next chunk (the writer
                # stores a repeat once and refuses a different one, by id; rows are kept by id)
                yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)
                cols, failures, same, ids = _Columns(), [], [], set()
            if is_unchanged(known, tid, dig, measure):
                same.append((tid, dig))
                continue
            ids.add(tid)
            measured, critical = measure_trace(raw) if measure else (None, None)
            add_trace(
                cols,
                raw.data,
                source=source,
                dig=dig,
                today=today,
                now=now,
                measured=measured,
                critical=critical,
            )
            if cols.n_events >= chunk_events:
                yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)
                cols, failures, same, ids = _Columns(), [], [], set()
    except LoadError as e:
        failures.append(Failure(path, e.line, None, [e.finding()]))
    yield Chunk(path, cols.tables(), failures, cols.n_traces, cols.n_events, same)


def prepare_file(
    path: str, measure: bool = True, chunk_events: int = 200_000, known: Known | None = None
) -> list[Chunk]:
    """All chunks of one file at once (what a Ray task returns)."""
    return list(iter_chunks(path, measure=measure, chunk_events=chunk_events, known=known))
