"""What ``orchestrace stats`` reports: counts of a trace (events by type, agent and role, edges,
duration, costs) and their sums over a corpus.

An event log is validated first (the same verdict as ``validate``), then streamed record by
record, so its counts take constant memory; other files are read trace by trace.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from .errors import InvalidTrace, OrchestraceError
from .io import iter_traces
from .model import Trace
from .read import iter_log_records, merge_log_header, split_format
from .validate import validate_path

#: one event as the counts read it: type, agent, role, t, t_end, tokens
_Row = tuple[str, str, str | None, float, float | None, int]


class TraceCounts(msgspec.Struct):
    """Counts of one trace (the JSON of ``stats --format json`` is a list of these)."""

    path: str
    trace_id: str
    events: int
    edges: int
    agents: int
    duration_s: float
    event_tokens: int
    costs: dict[str, Any]
    by_type: dict[str, int]
    by_agent: dict[str, int]
    by_role: dict[str, int]


class CorpusCounts(msgspec.Struct):
    """Sums over traces: counts, durations, numeric costs, events by type and role."""

    traces: int
    events: int
    edges: int
    agents: int
    duration_s: float
    costs: dict[str, float]
    by_type: dict[str, int]
    by_role: dict[str, int]


def file_counts(path: str) -> Iterator[TraceCounts]:
    """Counts of every trace of one file; an invalid event log raises ``InvalidTrace``."""
    fmt, _ = split_format(path)
    if fmt == "events":
        checked = validate_path(path)
        if not checked.valid:
            raise InvalidTrace(checked.findings, path=path)
        yield log_counts(path)
        return
    for tr in iter_traces(path):
        yield trace_counts(tr, path)


def trace_counts(tr: Trace, path: str = "") -> TraceCounts:
    rows = ((e.type, e.agent, e.role, e.t, e.t_end, e.tokens) for e in tr.events)
    return _counts(path, tr.trace_id, rows, len(tr.edges), tr.costs)


def log_counts(path: str) -> TraceCounts:
    """Counts of an event log without building the trace (constant memory per record)."""
    top: dict[str, Any] = {}
    n_edges = 0

    def rows() -> Iterator[_Row]:
        nonlocal n_edges
        for line, rec in iter_log_records(path):
            kind = rec.get("rec")
            if kind == "event":
                try:
                    tok = (rec.get("tokens_in") or 0) + (rec.get("tokens_out") or 0)
                    yield rec["type"], rec["agent"], rec.get("role"), float(rec["t"]), rec.get("t_end"), tok
                except (KeyError, TypeError, ValueError):
                    raise OrchestraceError(
                        "OT101", "event record lacks a valid type/agent/t", path=path, line=line
                    ) from None
            elif kind == "edge":
                n_edges += 1
            elif kind in ("header", "update"):
                merge_log_header(top, rec)

    c = _counts(path, "", rows(), 0, {})
    c.edges = n_edges
    c.trace_id = top.get("trace_id", "?")
    c.costs = top.get("costs", {})
    return c


def corpus_counts(items: list[TraceCounts]) -> CorpusCounts:
    costs: Counter[str] = Counter()
    by_type: Counter[str] = Counter()
    by_role: Counter[str] = Counter()
    for x in items:
        costs.update(
            {k: v for k, v in x.costs.items() if isinstance(v, int | float) and not isinstance(v, bool)}
        )
        by_type.update(x.by_type)
        by_role.update(x.by_role)
    return CorpusCounts(
        traces=len(items),
        events=sum(x.events for x in items),
        edges=sum(x.edges for x in items),
        agents=sum(x.agents for x in items),
        duration_s=sum(x.duration_s for x in items),
        costs=dict(costs),
        by_type=dict(by_type.most_common()),
        by_role=dict(by_role.most_common()),
    )


def _counts(
    path: str, trace_id: str, rows: Iterable[_Row], n_edges: int, costs: dict[str, Any]
) -> TraceCounts:
    by_type: Counter[str] = Counter()
    by_agent: Counter[str] = Counter()
    by_role: Counter[str] = Counter()
    n = 0
    lo, hi = float("inf"), 0.0
    tokens = 0
    for ty, ag, role, t, t_end, tok in rows:
        n += 1
        by_type[ty] += 1
        by_agent[ag] += 1
        if role:
            by_role[role] += 1
        lo = min(lo, t)
        hi = max(hi, t if t_end is None else t_end)
        tokens += tok
    return TraceCounts(
        path=path,
        trace_id=trace_id,
        events=n,
        edges=n_edges,
        agents=len(by_agent),
        duration_s=max(0.0, hi - lo) if n else 0.0,
        event_tokens=tokens,
        costs=costs,
        by_type=dict(by_type.most_common()),
        by_agent=dict(by_agent.most_common()),
        by_role=dict(by_role.most_common()),
    )
