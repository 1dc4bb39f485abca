"""TraceView: one trace as arrays, built once and shared by every metric.

It wraps ``core.graph.TraceGraph`` and adds what the metrics need on top: the *dependency graph*
(explicit edges plus implicit program order and delivery), its topological order, per-event cost arrays and the
final-answer node. Every metric function accepts a ``Trace`` or a ``TraceView``; pass a view when
computing several metrics so the arrays are built once.

Definitions (ours; spec §8 leaves them open):

- **Dependency graph.** Every explicit edge is a dependency, except a ``temporal`` edge between two
  different agents (it only states an order, not that one needed the other). On top, each agent's
  own events are chained in time order, ties broken consistently with the explicit edges
  (*program order*: an LLM agent acts one step after the other). ``tool_result`` events are left out of program order, because their ``agent`` is often
  the tool's name, shared by concurrent calls; they depend on what their edges say. Finally a
  ``message`` or ``return`` with a ``to`` but no edge to any event of that recipient is *delivered*
  to the recipient's next event that starts at or after its end (a Lamport receive), so logs that
  record a return but not where it was consumed still connect the sub-agent to its parent.
- **Effective duration** of an event: from the moment its last input was ready to its end,
  ``t_end - min(t, max(t_end of its dependencies))`` (just ``t_end - t`` without dependencies).
  A dependency that was still running when the event started (parallel tool calls chained by
  program order) only needed to have *started*: its start, not its end, counts as the input time.
  So the time an agent spends producing an event (LLM latency, which traces record as a gap before
  the event rather than as its duration) is charged to that event, and traces with instantaneous
  events (no ``t_end``) still have meaningful wall-clock metrics.
- **Tool execution**: a ``tool_result`` event, over its effective interval: from its call (its
  input) to its end. Every execution is work of its own, so concurrent calls of one tool (whose
  results share the tool's name as ``agent``) and one agent's parallel calls each count in full.
- **Busy time** of an agent: the length of the union of its own events' effective intervals
  ``[ready, t_end]`` (tool results excluded), so an agent working on overlapping events (a turn
  that spans its own sub-steps) is busy once, not once per event; minus the time its own tool
  executions cover (an event after a call is often chained to the call, not the result, so its
  interval spans the wait: that wait is the tool's work, counted there).
- **Serial work**: the busy time of every agent plus every tool execution.
- **Final node**: the last ``aggregate`` event; without one, the last event of the root agent
  (the agent of the earliest event that is an agent action, so not a user prompt logged as a
  ``human_intervention``, a tool result or a safety event).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix

from ..core.graph import EDGE_CODE, EVENT_CODE, TraceGraph, kahn_order
from ..core.model import Trace

TOOL_RESULT = EVENT_CODE["tool_result"]
TOOL_CALL = EVENT_CODE["tool_call"]
TEMPORAL = EDGE_CODE["temporal"]
_EMPTY = np.zeros(0, dtype=np.int64)
_NOT_AGENT_ACTION = np.asarray([EVENT_CODE[t] for t in ("tool_result", "human_intervention", "safety_event")])


class TraceView:
    """Arrays over one trace for the metrics; cheap attributes are computed on first use."""

    def __init__(self, trace: Trace, graph: TraceGraph | None = None) -> None:
        self.trace = trace
        self.g = graph if graph is not None else TraceGraph(trace)
        self.n = self.g.n

    # ------------------------------------------------------------ per-event arrays

    @cached_property
    def tokens_in(self) -> np.ndarray:
        return np.fromiter((e.tokens_in or 0 for e in self.trace.events), dtype=np.int64, count=self.n)

    @cached_property
    def tokens_out(self) -> np.ndarray:
        return np.fromiter((e.tokens_out or 0 for e in self.trace.events), dtype=np.int64, count=self.n)

    @cached_property
    def usd(self) -> np.ndarray:
        return np.fromiter((e.cost_usd or 0.0 for e in self.trace.events), dtype=np.float64, count=self.n)

    @cached_property
    def with_attrs(self) -> np.ndarray:
        """Indices of events carrying ``attrs`` (few in most traces; scanned for flags)."""
        return np.fromiter((i for i, e in enumerate(self.trace.events) if e.attrs), dtype=np.int64)

    def attr_flag(self, *keys: str) -> np.ndarray:
        """Mask of events whose ``attrs`` has a truthy value under any of the keys."""
        out = np.zeros(self.n, dtype=bool)
        ev = self.trace.events
        for i in self.with_attrs.tolist():
            a = ev[i].attrs
            if any(a.get(k) for k in keys):  # type: ignore[union-attr]
                out[i] = True
        return out

    @cached_property
    def actors(self) -> np.ndarray:
        """Agent codes that act (have an event other than a tool_result): tools are not agents."""
        g = self.g
        return np.unique(g.agent[g.type != TOOL_RESULT])

    # ------------------------------------------------------------ dependency graph

    @cached_property
    def time_order(self) -> np.ndarray:
        """Events in time order, ties by trace order unless an explicit edge says otherwise (core's
        topological order; sorted by time because every edge goes forward in time)."""
        return np.asarray(self.g.topo_order, dtype=np.int64)

    @cached_property
    def prev_same_agent(self) -> np.ndarray:
        """For each event, the previous event of the same agent in time order (all types), or -1."""
        g = self.g
        order = np.lexsort((self.time_pos, g.agent))
        prev = np.full(self.n, -1, dtype=np.int64)
        same = g.agent[order[1:]] == g.agent[order[:-1]]
        prev[order[1:][same]] = order[:-1][same]
        return prev

    @cached_property
    def program_order(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of the implicit program-order edges (tool_results excluded)."""
        g = self.g
        keep = np.nonzero(g.type != TOOL_RESULT)[0]
        order = keep[np.lexsort((self.time_pos[keep], g.agent[keep]))]
        same = g.agent[order[1:]] == g.agent[order[:-1]]
        return order[:-1][same], order[1:][same]

    @cached_property
    def delivery(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of implicit delivery edges: an undelivered message or return -> the
        recipient's next event (see module docstring)."""
        g = self.g
        ev = self.trace.events
        cand = g.nodes("message", "return")
        if not len(cand):
            return _EMPTY, _EMPTY
        code = {a: i for i, a in enumerate(g.agents)}
        to = np.fromiter(
            (code.get(ev[i].to or "", -1) for i in cand.tolist()), dtype=np.int64, count=len(cand)
        )
        # explicitly delivered: an out-edge to an event of the recipient
        has = np.zeros(self.n, dtype=np.int64) - 1
        has[cand] = to
        hit = (has[g.src] >= 0) & (g.agent[g.dst] == has[g.src])
        delivered = np.zeros(self.n, dtype=bool)
        delivered[g.src[hit]] = True
        keep = (to >= 0) & ~delivered[cand] & (to != g.agent[cand])
        cand, to = cand[keep], to[keep]
        if not len(cand):
            return _EMPTY, _EMPTY
        pos = self.time_pos
        # recipient events sorted by (agent, t, position); find the first at or after each t_end
        recv = np.nonzero(g.type != TOOL_RESULT)[0]
        recv = recv[np.lexsort((pos[recv], g.t[recv], g.agent[recv]))]
        ra, rt = g.agent[recv], g.t[recv]
        src_out, dst_out = [], []
        for a in np.unique(to).tolist():
            lo, hi = np.searchsorted(ra, a, "left"), np.searchsorted(ra, a, "right")
            sel = to == a
            c = cand[sel]
            k = lo + np.searchsorted(rt[lo:hi], g.t_end[c], "left")
            ok = k < hi
            c, k = c[ok], k[ok]
            # the recipient event must also come after the sender in time order
            while len(c) and (bad := pos[recv[k]] <= pos[c]).any():
                k = np.where(bad, k + 1, k)
                ok = k < hi
                c, k = c[ok], k[ok]
            src_out.append(c)
            dst_out.append(recv[k])
        return np.concatenate(src_out), np.concatenate(dst_out)

    @cached_property
    def time_pos(self) -> np.ndarray:
        """Position of each event in time order."""
        pos = np.empty(self.n, dtype=np.int64)
        pos[self.time_order] = np.arange(self.n)
        return pos

    @cached_property
    def dep_edges_typed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, edge type code; -1 for implicit edges) of every dependency."""
        g = self.g
        keep = (g.etype != TEMPORAL) | (g.agent[g.src] == g.agent[g.dst])
        ps, pd = self.program_order
        ds, dd = self.delivery
        implicit = len(ps) + len(ds)
        return (
            np.concatenate([g.src[keep].astype(np.int64), ps, ds]),
            np.concatenate([g.dst[keep].astype(np.int64), pd, dd]),
            np.concatenate([g.etype[keep].astype(np.int64), np.full(implicit, -1, dtype=np.int64)]),
        )

    @cached_property
    def dep_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, dst) of every dependency: explicit edges (no cross-agent temporal) + implicit ones."""
        s, d, _ = self.dep_edges_typed
        return s, d

    def _csr(self, src: np.ndarray, dst: np.ndarray) -> csr_matrix:
        a = csr_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(self.n, self.n))
        a.sum_duplicates()
        return a

    @cached_property
    def deps(self) -> csr_matrix:
        """Dependency adjacency, row = source."""
        return self._csr(*self.dep_edges)

    @cached_property
    def deps_rev(self) -> csr_matrix:
        """Dependency adjacency, row = destination (predecessor lists)."""
        s, d = self.dep_edges
        return self._csr(d, s)

    @cached_property
    def topo(self) -> np.ndarray:
        """A topological order of the dependency graph (time order when edges respect it)."""
        order = self.time_order
        pos = self.time_pos
        s, d = self.dep_edges
        if not len(s) or bool(np.all(pos[s] < pos[d])):
            return order
        return kahn_order(self.deps, self.g.t, what="dependencies")

    @cached_property
    def preds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Predecessor lists as (indptr, pred, finish_to_start) sorted by destination.

        An edge p -> v is *finish-to-start* when p ended before v started; otherwise v started
        while p still ran and only needed p to have started (start-to-start).
        """
        g = self.g
        s, d = self.dep_edges
        order = np.argsort(d, kind="stable")
        s, d = s[order], d[order]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(d, minlength=self.n))])
        return indptr, s, g.t_end[s] <= g.t[d]

    @cached_property
    def ready(self) -> np.ndarray:
        """When each event's inputs were ready: min(t, latest end of a finish-to-start dependency
        or start of a start-to-start one)."""
        g = self.g
        indptr, s, fs = self.preds
        has = np.diff(indptr) > 0
        latest = np.full(self.n, -np.inf)
        if len(s):
            avail = np.where(fs, g.t_end[s], g.t[s])
            latest[has] = np.maximum.reduceat(avail, indptr[:-1][has])
        return np.where(has, np.minimum(g.t, latest), g.t)

    @cached_property
    def effective_duration(self) -> np.ndarray:
        return np.maximum(0.0, self.g.t_end - self.ready)

    @cached_property
    def caller(self) -> np.ndarray:
        """For each ``tool_result``, the agent code of the ``tool_call`` with an edge to it, else -1."""
        g = self.g
        out = np.full(self.n, -1, dtype=np.int64)
        sel = (g.type[g.src] == TOOL_CALL) & (g.type[g.dst] == TOOL_RESULT)
        out[g.dst[sel]] = g.agent[g.src[sel]]
        return out

    @cached_property
    def work_interval(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of each event's effective interval ``[ready, max(t_end, ready)]``."""
        return self.ready, np.maximum(self.g.t_end, self.ready)

    @cached_property
    def busy_time(self) -> np.ndarray:
        """Each event's share of the serial work (module docstring): a ``tool_result`` its whole
        interval (one tool execution); an agent's own event the part of its interval not already
        covered by an earlier-starting event of the same agent nor by one of the agent's tool
        executions. Summed over an agent it is that agent's busy time (``busy_s``); summed over
        the trace it is the serial work, up to float rounding (``serial_work`` is exact)."""
        g = self.g
        start, end = self.work_interval
        is_exec = g.type == TOOL_RESULT
        out = np.where(is_exec, end - start, 0.0)
        own = np.nonzero(~is_exec)[0]
        order = own[np.lexsort((own, start[own], g.agent[own]))].tolist()
        agent, s, e = g.agent.tolist(), start.tolist(), end.tolist()
        lo_of = np.zeros(self.n)
        cur, reach = None, -math.inf
        for i in order:
            if agent[i] != cur:
                cur, reach = agent[i], -math.inf
            lo = max(s[i], reach)
            if e[i] > lo:
                out[i] = e[i] - lo
                lo_of[i] = lo
                reach = e[i]
        # the time an agent waits on its own tool executions is theirs, not the agent's
        caller = self.caller
        owned = caller >= 0
        pieces = _merge(start[owned], end[owned], caller[owned])
        idx = np.nonzero(~is_exec & (out > 0))[0]
        a = g.agent[idx]
        out[idx] -= _covered(*pieces, a, end[idx]) - _covered(*pieces, a, lo_of[idx])
        return np.maximum(out, 0.0)

    @cached_property
    def serial_work(self) -> float:
        """Serial work, exact up to one rounding: the sum over agents of the length of the union
        of their own events' intervals minus their tool executions, plus every tool execution.
        Written as one ``fsum`` of interval end points, so it is never below the critical path,
        whose length is such a sum over disjoint intervals (``time_critical_path``)."""
        g = self.g
        start, end = self.work_interval
        is_exec = g.type == TOOL_RESULT
        caller = self.caller
        owned = is_exec & (caller >= 0)
        key = np.where(is_exec, caller, g.agent)
        # per agent: |own events U own executions| - |own executions| = |own events \ executions|
        _, us, ue = _merge(start[~is_exec | owned], end[~is_exec | owned], key[~is_exec | owned])
        _, ms, me = _merge(start[owned], end[owned], key[owned])
        parts = [_lengths(us, ue), -_lengths(ms, me), _lengths(start[is_exec], end[is_exec])]
        return math.fsum(np.concatenate(parts).tolist())

    # ------------------------------------------------------------ special nodes

    @cached_property
    def root_agent(self) -> int:
        """Agent of the earliest agent action (not a tool result, human or safety event)."""
        g = self.g
        order = self.time_order
        acting = ~np.isin(g.type[order], _NOT_AGENT_ACTION)
        first = order[acting][:1] if acting.any() else order[:1]
        return int(g.agent[first[0]]) if len(first) else -1

    @cached_property
    def final_node(self) -> int:
        """The final answer: last aggregate, else the root agent's last event."""
        g = self.g
        agg = g.nodes("aggregate")
        cand = agg if len(agg) else np.nonzero(g.agent == self.root_agent)[0]
        if not len(cand):
            return -1
        return int(cand[np.lexsort((cand, g.t_end[cand], g.t[cand]))[-1]])


def _merge(start: np.ndarray, end: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The disjoint union of intervals ``[start, end]`` within each key: (key, start, end) of the
    merged pieces, sorted by key then start."""
    if not len(start):
        return key, start, end
    o = np.lexsort((start, key))
    k, s, e = key[o], start[o], end[o]
    first = np.ones(len(s), dtype=bool)
    first[1:] = k[1:] != k[:-1]
    run, fl = e.tolist(), first.tolist()
    for i in range(1, len(run)):  # running maximum of the ends within each key
        if not fl[i] and run[i - 1] > run[i]:
            run[i] = run[i - 1]
    reach = np.asarray(run, dtype=np.float64)
    # a piece starts at a new key or after the reach of everything before it
    new = first.copy()
    new[1:] |= s[1:] > reach[:-1]
    heads = np.nonzero(new)[0]
    tails = np.concatenate([heads[1:] - 1, [len(s) - 1]])
    return k[heads], s[heads], reach[tails]


def _lengths(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """``end, -start`` of each interval in turn: summed by ``math.fsum`` they give the total
    length exactly rounded, and no running sum exceeds the lengths so far plus one end point."""
    return np.column_stack((end, -start)).ravel()


def _covered(km: np.ndarray, ms: np.ndarray, me: np.ndarray, qa: np.ndarray, qx: np.ndarray) -> np.ndarray:
    """For each query (key ``qa``, time ``qx``): the length of ``(-inf, qx]`` covered by that
    key's pieces of ``_merge`` (``km``, ``ms``, ``me``: disjoint, sorted by key then start)."""
    n = len(ms)
    if not n or not len(qx):
        return np.zeros(len(qx))
    cum = np.concatenate([[0.0], np.cumsum(me - ms)])
    # sort pieces and queries together by (key, time), a piece before a query at equal values:
    # the pieces before a query are those of lower keys and its key's pieces starting by qx
    is_q = np.concatenate([np.zeros(n, dtype=bool), np.ones(len(qx), dtype=bool)])
    o = np.lexsort((is_q, np.concatenate([ms, qx]), np.concatenate([km, qa])))
    before = np.cumsum(~is_q[o])
    k = np.empty(len(qx), dtype=np.int64)
    k[o[is_q[o]] - n] = before[is_q[o]]
    first = np.searchsorted(km, qa, "left")  # the key's first piece
    j = np.maximum(k - 1, 0)  # the last piece starting by qx
    part = np.clip(np.minimum(qx, me[j]) - ms[j], 0.0, None)
    return np.where(k > first, cum[j] - cum[first] + part, 0.0)


def as_view(x: Trace | TraceView) -> TraceView:
    return x if isinstance(x, TraceView) else TraceView(x)


def longest_path(view: TraceView, weight: np.ndarray) -> tuple[float, list[int]]:
    """Heaviest dependency path (node weights >= 0): (total, nodes in order).

    One pass in topological order over plain Python lists: about 0.5 s per million events, which
    beats per-node numpy calls by an order of magnitude.
    """
    n = view.n
    if n == 0:
        return 0.0, []
    indptr_a, preds_a, _ = view.preds
    indptr, indices = indptr_a.tolist(), preds_a.tolist()
    w = np.asarray(weight, dtype=np.float64).tolist()
    best = list(w)
    prev = [-1] * n
    for v in view.topo.tolist():
        lo, hi = indptr[v], indptr[v + 1]
        if lo == hi:
            continue
        p = indices[lo]
        b = best[p]
        for k in range(lo + 1, hi):
            q = indices[k]
            if best[q] > b:
                p, b = q, best[q]
        best[v] = w[v] + b
        prev[v] = p
    end = max(range(n), key=best.__getitem__)
    path = [end]
    while prev[path[-1]] >= 0:
        path.append(prev[path[-1]])
    path.reverse()
    return float(best[end]), path


def multi_bfs(a: csr_matrix, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Breadth-first search from several start nodes at once (a virtual root joined to each).

    Returns (mask of reached nodes, BFS-tree predecessor per node, -1 for starts and unreached),
    so following predecessors from a node gives a shortest path back to its nearest start.
    """
    from scipy.sparse.csgraph import breadth_first_order

    n = a.shape[0]
    reached = np.zeros(n, dtype=bool)
    pred = np.full(n, -1, dtype=np.int64)
    starts = np.unique(np.asarray(starts, dtype=np.int64))
    if not len(starts):
        return reached, pred
    rows = np.concatenate([np.repeat(np.arange(n), np.diff(a.indptr)), np.full(len(starts), n)])
    cols = np.concatenate([a.indices, starts])
    big = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
    order, p = breadth_first_order(big, n, directed=True, return_predecessors=True)
    order = order[order < n]
    reached[order] = True
    p = p[:n].astype(np.int64)
    pred[order] = np.where(p[order] == n, -1, p[order])
    return reached, pred


def time_critical_path(view: TraceView) -> tuple[float, list[int], list[float]]:
    """Critical path in wall-clock: a replay of the trace with unlimited agents.

    Each event lasts its effective duration and starts when its finish-to-start dependencies
    have finished and its start-to-start ones have started: ``S(v) = max(F(p) | S(p))``,
    ``F(v) = S(v) + w(v)``. ``F`` at the end of the path is the sum of the effective durations of
    the path's events followed by a finish-to-start edge (and the last). Along a dependency path
    an event's ready time is never before its predecessor's, and after a finish-to-start edge
    never before the predecessor's end; so those events' effective intervals are disjoint, and
    the length never exceeds the trace's wall-clock span nor the serial work (which covers every
    interval). The length is that sum taken exactly (one ``fsum`` of interval end points), so the
    bound holds in floating point too; the finish times are the replay's.
    Returns (length, path, replay finish time of each path node).
    """
    n = view.n
    if n == 0:
        return 0.0, [], []
    indptr_a, preds_a, fs_a = view.preds
    indptr, preds, fs = indptr_a.tolist(), preds_a.tolist(), fs_a.tolist()
    w = view.effective_duration.tolist()
    start = [0.0] * n
    fin = list(w)
    prev = [-1] * n
    for v in view.topo.tolist():
        lo, hi = indptr[v], indptr[v + 1]
        if lo == hi:
            continue
        b, p = -1.0, -1
        for k in range(lo, hi):
            q = preds[k]
            c = fin[q] if fs[k] else start[q]
            if c > b:
                b, p = c, q
        start[v] = b
        fin[v] = b + w[v]
        prev[v] = p
    end = max(range(n), key=fin.__getitem__)
    path = [end]
    while prev[path[-1]] >= 0:
        path.append(prev[path[-1]])
    path.reverse()
    ready, t_end = view.work_interval
    counted = [p for p, q in zip(path, path[1:], strict=False) if fs[_edge(indptr, preds, p, q)]] + [end]
    length = math.fsum(_lengths(ready[counted], t_end[counted]).tolist())
    return length, path, [fin[i] for i in path]


def _edge(indptr: list[int], preds: list[int], p: int, q: int) -> int:
    """Position of the dependency p -> q in the predecessor lists."""
    return preds.index(p, indptr[q], indptr[q + 1])
