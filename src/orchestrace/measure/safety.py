"""Trace-level safety: untrusted sources, taint propagation, tainted decisions (spec §2.5, §8.3).

None of this is in the survey; the definitions are ours:

- **Untrusted source**: an event with ``trusted: false``, or a ``tool_result`` of a tool marked
  external (``attrs.external = true`` on the event, or the tool named in the trace's
  ``metadata["external_tools"]``).
- **Taint** flows from sources along ``causal``, ``message``, ``tool_dependency``, ``return``,
  ``aggregate`` and ``safety_flow`` edges and, beyond the issue's list, along the implicit
  dependencies of ``view.py`` (an agent's own later events, including ``temporal`` edges within one
  agent: untrusted text stays in that agent's context; and undelivered returns and messages reaching
  their recipient). It does not flow along ``spawn`` edges (the spawn itself is reported as a
  tainted decision) or ``temporal`` edges between agents. A **sanitising event** (``safety_event`` or
  ``human_intervention``) can be reached, but taint does not flow out of it.
- **Decisions**: ``orchestrator_decision``, ``spawn``, ``tool_call`` and ``aggregate`` events and the
  final node. A **tainted decision** is a decision reachable by at least one edge from a source
  with no sanitising event on the path; each comes with one shortest example path.
- ``tainted_decisions`` is null when the trace carries no trust information at all (no event has
  ``trusted`` set and no tool is marked external): it was not instrumented, which is not the same
  as safe.
- Counts, one name each, the same in ``analyze``, ``safety`` and the viewer: ``untrusted_sources``
  (source events), ``tainted_events`` (events reached from a source, sources not included),
  ``tainted_decisions`` (the decisions among the tainted events). Fractions: ``taint_reach`` =
  (untrusted sources + tainted events) / all events, ``tainted_decision_fraction`` = tainted
  decisions / all decisions; ``sanitized`` counts sanitising events that stopped a flow.

**Attack vectors** (survey Table 15) are inferred labels, candidates rather than verdicts:
AV1 the source is a ``human_intervention`` (direct injection); AV2 the source is a tool result
(indirect injection); AV3 the path carries a ``message`` (edge or event), or the source is a
message (inter-agent pollution); AV4 a memory-like tool (``memory``, ``kv``, ``vector``, ``store``
in its name, or ``attrs.shared_memory``) is the source or on the path; AV5 the decision is a tool
call (tool-parameter escalation); AV6 the decision is made by an orchestrating agent (the root
agent or any agent that spawns) or is the final node (orchestrator misdirection); AV8 the decision
is a spawn (the entry point for sandbox escape under spawn). AV7 (reward hacking) cannot be seen
in a flow and is never inferred.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.sparse import csr_matrix

from ..core.graph import EDGE_CODE, EVENT_CODE
from ..core.model import Trace
from .view import TraceView, as_view, multi_bfs

SANITIZERS = ("safety_event", "human_intervention")
DECISIONS = ("orchestrator_decision", "spawn", "tool_call", "aggregate")
_MEMORY_WORDS = ("memory", "kv", "vector", "store")


def untrusted_sources(x: Trace | TraceView) -> np.ndarray:
    v = as_view(x)
    g = v.g
    src = g.untrusted.copy()
    meta = v.trace.metadata or {}
    external = set(meta.get("external_tools") or ())
    ev = v.trace.events
    results = g.nodes("tool_result")
    if external:
        for i in results.tolist():
            if ev[i].tool in external:
                src[i] = True
    return src | (v.attr_flag("external") & g.mask("tool_result"))


def instrumented(x: Trace | TraceView) -> bool:
    """Does the trace carry trust information at all?"""
    v = as_view(x)
    meta = v.trace.metadata or {}
    return (
        bool(meta.get("external_tools"))
        or any(e.trusted is not None for e in v.trace.events)
        or bool(v.attr_flag("external").any())
    )


class Taint:
    """Result of one propagation: sources, tainted mask, BFS predecessors, decisions."""

    def __init__(self, v: TraceView, sources: np.ndarray) -> None:
        g = v.g
        self.v = v
        self.sources = sources
        s, d, et = v.dep_edges_typed
        sanitizer = g.mask(*SANITIZERS) & ~sources
        sel = (et != EDGE_CODE["spawn"]) & ~sanitizer[s]
        order = np.argsort(s[sel], kind="stable")  # edges grouped by source, for path lookups
        s, d, et = s[sel][order], d[sel][order], et[sel][order]
        self.edge_src, self.edge_dst, self.edge_type = s, d, et
        self.out_ptr = np.concatenate([[0], np.cumsum(np.bincount(s, minlength=v.n))])
        a = csr_matrix((np.ones(len(s), dtype=np.int8), (s, d)), shape=(v.n, v.n))
        a.sum_duplicates()
        self.reached, self.pred = multi_bfs(a, d[sources[s]])  # strictly downstream of a source
        decision = g.mask(*DECISIONS)
        if v.final_node >= 0:
            decision[v.final_node] = True
        self.decision = decision
        self.tainted_decisions = np.nonzero(self.reached & decision)[0]
        self.sanitized = int((self.reached & g.mask(*SANITIZERS)).sum())

    def path(self, node: int) -> list[int]:
        """One shortest path from a source to ``node`` (event indices, source first)."""
        p = [node]
        while self.pred[p[-1]] >= 0:
            p.append(int(self.pred[p[-1]]))
        first = p[-1]
        into = np.nonzero((self.edge_dst == first) & self.sources[self.edge_src])[0]  # one scan per path
        p.append(int(self.edge_src[into[0]]))
        p.reverse()
        return p

    def edge_types_on(self, path: list[int]) -> set[str]:
        """Edge types joining consecutive nodes of a path (any edge that fits)."""
        names = {c: n for n, c in EDGE_CODE.items()} | {-1: "implicit"}
        out: set[str] = set()
        for a, b in zip(path, path[1:], strict=False):
            lo, hi = self.out_ptr[a], self.out_ptr[a + 1]
            k = lo + np.nonzero(self.edge_dst[lo:hi] == b)[0]
            out.update(names[int(c)] for c in self.edge_type[k])
        return out


def taint(x: Trace | TraceView, sources: np.ndarray | None = None) -> Taint:
    v = as_view(x)
    return Taint(v, untrusted_sources(v) if sources is None else sources)


def safety_metrics(x: Trace | TraceView) -> dict[str, Any]:
    """``{"tainted_decisions", "untrusted_sources", "tainted_events", "taint_reach",
    "tainted_decision_fraction", "sanitized"}`` (definitions in the module docstring)."""
    v = as_view(x)
    keys = (
        "tainted_decisions",
        "untrusted_sources",
        "tainted_events",
        "taint_reach",
        "tainted_decision_fraction",
        "sanitized",
    )
    if not instrumented(v):
        return dict.fromkeys(keys)
    t = taint(v)
    n_dec = int(t.decision.sum())
    return {
        "tainted_decisions": len(t.tainted_decisions),
        "untrusted_sources": int(t.sources.sum()),
        "tainted_events": int((t.reached & ~t.sources).sum()),
        "taint_reach": float((t.reached | t.sources).sum()) / v.n if v.n else 0.0,
        "tainted_decision_fraction": len(t.tainted_decisions) / n_dec if n_dec else None,
        "sanitized": t.sanitized,
    }


def _orchestrators(v: TraceView) -> set[int]:
    g = v.g
    return {v.root_agent, *np.unique(g.agent[g.mask("spawn", "despawn")]).tolist()}


def _memory_like(e: Any) -> bool:
    name = (e.tool or "").lower()
    return any(w in name for w in _MEMORY_WORDS) or bool(e.attrs and e.attrs.get("shared_memory"))


def attack_vectors(v: TraceView, t: Taint, path: list[int], orchestrators: set[int]) -> list[str]:
    """Inferred AV labels for one flow (see module docstring)."""
    ev = v.trace.events
    g = v.g
    src, dec = path[0], path[-1]
    labels: set[str] = set()
    stype = ev[src].type
    if stype == "human_intervention":
        labels.add("AV1")
    if stype == "tool_result":
        labels.add("AV2")
    if stype == "message" or any(ev[i].type == "message" for i in path) or "message" in t.edge_types_on(path):
        labels.add("AV3")
    if any(_memory_like(ev[i]) for i in path):
        labels.add("AV4")
    if g.type[dec] == EVENT_CODE["tool_call"]:
        labels.add("AV5")
    if dec == v.final_node or (int(g.agent[dec]) in orchestrators and g.type[dec] != EVENT_CODE["tool_call"]):
        labels.add("AV6")
    if g.type[dec] == EVENT_CODE["spawn"]:
        labels.add("AV8")
    return sorted(labels)


def taint_flows(x: Trace | TraceView, *, limit: int | None = None) -> list[dict[str, Any]]:
    """One finding per tainted decision (time order): ids, agent, type, example path, AV labels."""
    v = as_view(x)
    t = taint(v)
    ev = v.trace.events
    dec = t.tainted_decisions
    dec = dec[np.lexsort((dec, v.g.t[dec]))]
    if limit is not None:
        dec = dec[:limit]
    orch = _orchestrators(v)
    out = []
    for d in dec.tolist():
        path = t.path(d)
        out.append(
            {
                "decision": ev[d].id,
                "type": ev[d].type,
                "agent": ev[d].agent,
                "final": d == v.final_node,
                "source": ev[path[0]].id,
                "path": [ev[i].id for i in path],
                "attack_vectors": attack_vectors(v, t, path, orch),
            }
        )
    return out
