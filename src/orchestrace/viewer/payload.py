"""The data the viewer page reads: one trace as compact columns, plus critical path and taint.

The page never parses a trace itself; it gets arrays (one entry per event, in trace order) so a
100,000-event trace is a few megabytes of JSON that ``JSON.parse`` reads in tens of milliseconds.
Repeated strings (agents, roles, tools, models, refs) go through one string table ``S``; per-event
columns hold indices into it (-1 = absent). Rare fields (``content``, ``attrs``, unknown fields)
are sparse maps ``{event index: value}``; a column with one value everywhere is sent once, in
``uniform``.

Critical path and taint come from ``orchestrace.measure`` (the same definitions as the metrics).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.graph import TraceGraph
from ..core.model import EDGE_TYPES, EVENT_TYPES, Trace
from ..measure import TraceView
from ..measure import critical_path as measure_critical_path
from ..measure import taint as measure_taint
from ..measure.safety import instrumented

#: Event string fields shipped through the string table, in payload order.
STRING_FIELDS = ("role", "from_", "to", "tool", "model", "content_ref", "call_id", "parent")
#: Per-event columns that may be folded into ``uniform`` when they hold a single value.
PER_EVENT = (
    "has_end",
    "tin",
    "tout",
    "cost",
    "err",
    "trusted",
    "turn",
    *("s_" + f.rstrip("_") for f in STRING_FIELDS),
)


class _Strings:
    """Interning table: each distinct string once, columns refer to it by index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.table: list[str] = []

    def code(self, s: str | None) -> int:
        if s is None:
            return -1
        c = self.index.get(s)
        if c is None:
            c = self.index[s] = len(self.table)
            self.table.append(s)
        return c


def lane_order(trace: Trace) -> tuple[list[str], list[int]]:
    """Agents in spawn-tree order (each spawned agent right below its parent, roots by first
    appearance, so a delegation reads top-down) and each lane's parent lane (-1 for roots)."""
    agents = trace.agents()
    acting = set(agents)
    children: dict[str, list[str]] = {}
    parent: dict[str, str] = {}
    for e in trace.events:
        if e.type == "spawn" and e.to in acting and e.to != e.agent and e.to not in parent:
            parent[e.to] = e.agent
            children.setdefault(e.agent, []).append(e.to)
    out: list[str] = []
    seen: set[str] = set()
    for root in agents:
        stack = [] if root in parent else [root]
        while stack:
            a = stack.pop()
            if a not in seen:
                seen.add(a)
                out.append(a)
                stack.extend(reversed(children.get(a, [])))
    out.extend(a for a in agents if a not in seen)  # agents only reachable through a spawn cycle
    pos = {a: i for i, a in enumerate(out)}
    return out, [pos[parent[a]] if a in parent else -1 for a in out]


def critical_path(view: TraceView) -> tuple[float, list[int], str]:
    """(length, event indices, method) of the wall-clock critical path: ``measure.critical_path``."""
    cp = measure_critical_path(view)
    return float(cp["length_s"]), [int(i) for i in cp["path"]], "orchestrace.measure.critical_path"


def taint(view: TraceView) -> tuple[list[int], list[int], list[int], list[int], int | None]:
    """(sources, tainted events, flow edge sources, flow edge destinations as event indices, and
    the number of tainted decisions): ``measure.taint``'s, nothing for a trace with no trust marks."""
    if not instrumented(view):
        return [], [], [], [], None
    t = measure_taint(view)
    tainted = t.sources | t.reached
    sel = tainted[t.edge_src] & t.reached[t.edge_dst]
    return (
        np.nonzero(t.sources)[0].tolist(),
        np.nonzero(t.reached & ~t.sources)[0].tolist(),
        t.edge_src[sel].tolist(),
        t.edge_dst[sel].tolist(),
        len(t.tainted_decisions),
    )


def _num(x: float | None) -> float | None:
    return None if x is None else float(x)


def build_payload(trace: Trace, *, max_content: int = 4000) -> dict[str, Any]:
    """The viewer's JSON document for one trace (see module docstring for the layout)."""
    ev = trace.events
    g = TraceGraph(trace)
    lanes, lane_parent = lane_order(trace)
    lane_of = {a: i for i, a in enumerate(lanes)}
    strings = _Strings()
    cols: dict[str, list[int]] = {f: [strings.code(getattr(e, f)) for e in ev] for f in STRING_FIELDS}
    content: dict[str, str] = {}
    truncated: list[int] = []
    extra: dict[str, Any] = {}
    credit_keys: dict[str, list[float | None]] = {}
    for i, e in enumerate(ev):
        if e.content is not None:
            text = e.content
            if len(text) > max_content:
                text = text[:max_content]
                truncated.append(i)
            content[str(i)] = text
        more = {**(e.extra or {}), **({"attrs": e.attrs} if e.attrs else {})}
        if more:
            extra[str(i)] = more
        if e.credit:
            for k, val in e.credit.items():
                credit_keys.setdefault(k, [None] * len(ev))[i] = float(val)
    view = TraceView(trace, g)
    cp_len, cp_path, cp_method = critical_path(view)
    t_src, t_reach, tf_src, tf_dst, t_dec = taint(view)
    type_code = {t: i for i, t in enumerate(EVENT_TYPES)}
    edge_code = {t: i for i, t in enumerate(EDGE_TYPES)}
    doc = {
        "format": "orchestrace-viewer/1",
        "trace": {
            "trace_id": trace.trace_id,
            "task_id": trace.task_id,
            "system": trace.system,
            "topology": trace.topology,
            "rewards": trace.rewards,
            "costs": trace.costs,
            "metrics": trace.metrics,
        },
        "n": len(ev),
        "types": list(EVENT_TYPES),
        "edge_types": list(EDGE_TYPES),
        "lanes": lanes,
        "lane_parent": lane_parent,
        "S": strings.table,
        "id": [e.id for e in ev],
        "t": [float(e.t) for e in ev],
        "te": [float(e.t if e.t_end is None else e.t_end) for e in ev],
        "has_end": [0 if e.t_end is None else 1 for e in ev],
        "type": [type_code[e.type] for e in ev],
        "lane": [lane_of[e.agent] for e in ev],
        "tin": [e.tokens_in for e in ev],
        "tout": [e.tokens_out for e in ev],
        "cost": [_num(e.cost_usd) for e in ev],
        "err": [1 if e.status == "error" else 0 for e in ev],
        "trusted": [None if e.trusted is None else int(e.trusted) for e in ev],
        "turn": [e.turn for e in ev],
        **{"s_" + f.rstrip("_"): c for f, c in cols.items()},
        "content": content,
        "truncated": truncated,
        "max_content": max_content,
        "extra": extra,
        "credit": credit_keys,
        "es": g.src.tolist(),
        "ed": g.dst.tolist(),
        "et": [edge_code[x.type] for x in trace.edges],
        "cp": cp_path,
        "cp_length": cp_len,
        "cp_method": cp_method,
        "taint_src": t_src,
        "tainted": t_reach,
        "taint_es": tf_src,
        "taint_ed": tf_dst,
        "tainted_decisions": t_dec,
    }
    return _fold_uniform(doc)


def _fold_uniform(doc: dict[str, Any]) -> dict[str, Any]:
    """Per-event columns holding one value everywhere (e.g. no event has a ``parent``) become
    ``doc["uniform"][name] = value``; the page expands them back after parsing."""
    n = doc["n"]
    uniform: dict[str, Any] = {}
    for k in PER_EVENT:
        col = doc[k]
        if n and all(v == col[0] and type(v) is type(col[0]) for v in col):
            uniform[k] = col[0]
            del doc[k]
    doc["uniform"] = uniform
    return doc
