"""Turn a truncated or damaged event log into a valid trace.

A killed recorder leaves at most one partial line at the end; a damaged file may hold more
garbage. Repair keeps every record that parses, drops what cannot be part of a valid trace
(bad lines, events that fail validation, edges whose endpoints are gone) and fills in costs.
It reports exactly what it dropped, so nothing disappears silently.
"""

from __future__ import annotations

import os
import re
import zlib
from typing import Any

import msgspec
import orjson

from ..core.errors import OrchestraceError
from ..core.io import save
from ..core.model import (
    REQUIRED_COSTS,
    SCHEMA_VERSION,
    TRACE_HEADER_FIELDS,
    Trace,
    derived_costs,
    trace_from_dict,
)
from ..core.read import REC, merge_log_header, split_format
from ..core.validate import validate_trace

_PTR = re.compile(r"^/(events|edges)/(\d+)")


class RepairReport(msgspec.Struct):
    source: str
    lines: int = 0
    bad_lines: int = 0
    events: int = 0
    edges: int = 0
    dropped_events: list[str] = msgspec.field(default_factory=list)
    dropped_edges: int = 0
    had_header: bool = True
    had_costs: bool = True


def repaired_path(path: str) -> str:
    """``run.events.jsonl`` -> ``run.repaired.events.jsonl`` (other names: ``.repaired`` before the format)."""
    for suffix in (".events.jsonl", ".jsonl", ".json"):
        for comp in ("", ".gz", ".zst"):
            if path.endswith(suffix + comp):
                return path[: -len(suffix + comp)] + ".repaired.events.jsonl"
    return path + ".repaired.events.jsonl"


def salvage_lines(path: str) -> list[bytes]:
    """Every line of a possibly truncated, possibly compressed file. A killed writer leaves a
    compressed stream without its end marker; decompressing incrementally keeps all data that was
    flushed before the kill (the stream readers would raise and lose the last buffer)."""
    _, comp = split_format(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise OrchestraceError("OT001", f"cannot read: {e.strerror}", path=path) from None
    if comp == "gz":
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = d.decompress(raw)
        except zlib.error:
            raw = b""
    elif comp == "zst":
        import zstandard

        try:
            raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
        except zstandard.ZstdError:
            raw = b""
    if raw[:3] == b"\xef\xbb\xbf":  # a byte-order mark, as the reader accepts it: the header stays
        raw = raw[3:]
    return raw.split(b"\n")


def read_salvage(path: str, report: RepairReport) -> dict[str, Any]:
    """Every record that still parses, assembled into a trace object (not yet valid)."""
    top: dict[str, Any] = {}
    events: list[Any] = []
    edges: list[Any] = []
    header = False
    for line in salvage_lines(path):
        if not line.strip():
            continue
        report.lines += 1
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            report.bad_lines += 1
            continue
        if not isinstance(rec, dict):
            report.bad_lines += 1
            continue
        kind = rec.pop(REC, None)
        if kind == "event":
            events.append(rec)
        elif kind == "edge":
            edges.append(rec)
        elif kind in ("header", "update"):
            header = header or kind == "header"
            merge_log_header(top, rec)
        else:
            report.bad_lines += 1
    report.had_header = header
    stem = os.path.basename(path).split(".")[0] or "repaired"
    if not isinstance(top.get("trace_id"), str) or not top["trace_id"]:
        top["trace_id"] = stem
    if not isinstance(top.get("task_id"), str) or not top["task_id"]:
        top["task_id"] = stem
    extra = {k: top.pop(k) for k in list(top) if k not in TRACE_HEADER_FIELDS}
    if extra:
        md = top.get("metadata") if isinstance(top.get("metadata"), dict) else {}
        top["metadata"] = {**md, "unknown_fields": extra}
    for k in ("rewards", "metrics"):
        if k in top and not _num_map(top[k]):
            top.pop(k)
    top.setdefault("rewards", {})
    top["events"] = [e for e in events if isinstance(e, dict)]
    top["edges"] = [x for x in edges if isinstance(x, dict)]
    return top


def _num_map(v: Any) -> bool:
    return isinstance(v, dict) and all(type(x) in (int, float) for x in v.values())


def repair_log(path: str) -> tuple[Trace, RepairReport]:
    """The valid trace that a (possibly truncated) event log still holds, and what was dropped."""
    report = RepairReport(source=path)
    if not os.path.exists(path):
        raise OrchestraceError("OT001", "file not found", path=path)
    d = read_salvage(path, report)
    report.had_costs = _costs_ok(d.get("costs"))
    for _ in range(50):  # each pass drops what the validator points at; few passes suffice
        if not report.had_costs:
            d["costs"] = _derived(d)
        if not d["events"] and split_format(path)[0] != "events":  # e.g. a .json trace given to repair
            raise OrchestraceError(
                "OT106",
                "no event-log record here: repair salvages an event log (.events.jsonl); "
                "`orchestrace validate` says what is wrong with a .json or .jsonl trace",
                path=path,
            )
        if not d["events"]:
            raise OrchestraceError("OT106", "no event survives in this log: nothing to repair", path=path)
        errors = [f for f in validate_trace(d) if f.severity == "error"]
        if not errors:
            break
        drop_ev: set[int] = set()
        drop_ed: set[int] = set()
        for f in errors:
            m = _PTR.match(f.pointer or "")
            if m is None:
                _fix_top(d, f.pointer or "")
                continue
            (drop_ev if m.group(1) == "events" else drop_ed).add(int(m.group(2)))
        if drop_ev:
            gone = dict.fromkeys(str(d["events"][i].get("id")) for i in sorted(drop_ev))
            report.dropped_events.extend(gone)
            d["events"] = [e for i, e in enumerate(d["events"]) if i not in drop_ev]
            keep = {_id(e.get("id")) for e in d["events"]} - {None}
            before = len(d["edges"])
            d["edges"] = [x for x in d["edges"] if _id(x.get("src")) in keep and _id(x.get("dst")) in keep]
            report.dropped_edges += before - len(d["edges"])
        if drop_ed:
            report.dropped_edges += len(drop_ed)
            d["edges"] = [x for j, x in enumerate(d["edges"]) if j not in drop_ed]
    else:
        raise OrchestraceError("OT110", "log could not be repaired into a valid trace", path=path)
    d.setdefault("schema_version", SCHEMA_VERSION)
    report.events, report.edges = len(d["events"]), len(d["edges"])
    return trace_from_dict(d), report


def _id(value: Any) -> int | str | None:
    """An event id or edge endpoint as a set can hold it; an object or a list there (a damaged
    log) is no id (it made repair exit 3: unhashable type)."""
    return value if isinstance(value, int | str) else None


def _costs_ok(c: Any) -> bool:
    return _num_map(c) and all(k in c for k in REQUIRED_COSTS) and all(x >= 0 for x in c.values())


def _derived(d: dict[str, Any]) -> dict[str, float]:
    try:
        return derived_costs(trace_from_dict({**d, "costs": {}}).events)
    except (TypeError, ValueError, KeyError, msgspec.ValidationError):
        return {"tokens": 0, "wall_clock_s": 0.0}


def _fix_top(d: dict[str, Any], pointer: str) -> None:
    key = pointer.strip("/").split("/")[0]
    if key in ("metrics", "metadata", "system", "topology"):
        d.pop(key, None)
    elif key == "rewards":
        d["rewards"] = {}
    elif key == "costs":
        d["costs"] = {"tokens": 0, "wall_clock_s": 0.0}


def repair(path: str, out: str | None = None) -> tuple[str, RepairReport]:
    """Repair ``path`` and write the trace to ``out`` (default: ``*.repaired.events.jsonl``)."""
    trace, report = repair_log(path)
    md = dict(trace.metadata or {})
    md["repair"] = {
        "source": os.path.basename(path),
        "bad_lines": report.bad_lines,
        "dropped_events": len(report.dropped_events),
        "dropped_edges": report.dropped_edges,
    }
    trace.metadata = md
    out = out or repaired_path(path)
    if os.path.abspath(out) == os.path.abspath(path):
        raise OrchestraceError(
            "OT112", "refusing to overwrite the log being repaired: choose another --out", path=path
        )
    save(trace, out)
    return out, report
