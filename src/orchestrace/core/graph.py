"""TraceGraph: a trace as compact arrays, built once, shared by metrics, credit and replay.

Events become integer nodes 0..n-1 in trace order. Per-node attributes are numpy arrays, edges
are CSR adjacency (optionally restricted to some edge types), so hot loops never touch
per-event Python objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cached_property

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from .errors import OrchestraceError
from .model import EDGE_TYPES, EVENT_TYPES, Trace
from .order import topological_order

EVENT_CODE = {name: i for i, name in enumerate(EVENT_TYPES)}
EDGE_CODE = {name: i for i, name in enumerate(EDGE_TYPES)}


def _codes(values: Iterable[str | None]) -> tuple[np.ndarray, list[str]]:
    """Integer codes for values in order of first appearance; None becomes -1."""
    table: dict[str, int] = {}
    out = []
    for v in values:
        if v is None:
            out.append(-1)
        else:
            c = table.get(v)
            if c is None:
                c = table[v] = len(table)
            out.append(c)
    return np.asarray(out, dtype=np.int32), list(table)


class TraceGraph:
    """Arrays over the events and edges of one trace."""

    def __init__(self, trace: Trace) -> None:
        ev = trace.events
        self.trace = trace
        self.n = n = len(ev)
        self.ids: list[str] = [e.id for e in ev]
        self.index: dict[str, int] = {eid: i for i, eid in enumerate(self.ids)}
        self.t = np.fromiter((e.t for e in ev), dtype=np.float64, count=n)
        self.t_end = np.fromiter((e.t if e.t_end is None else e.t_end for e in ev), dtype=np.float64, count=n)
        self.type = np.fromiter((EVENT_CODE[e.type] for e in ev), dtype=np.int8, count=n)
        self.agent, self.agents = _codes(e.agent for e in ev)
        self.role, self.roles = _codes(e.role for e in ev)
        self.tokens = np.fromiter(
            ((e.tokens_in or 0) + (e.tokens_out or 0) for e in ev), dtype=np.int64, count=n
        )
        self.error = np.fromiter((e.status == "error" for e in ev), dtype=bool, count=n)
        self.untrusted = np.fromiter((e.trusted is False for e in ev), dtype=bool, count=n)
        idx = self.index
        m = len(trace.edges)
        try:
            self.src = np.fromiter((idx[x.src] for x in trace.edges), dtype=np.int32, count=m)
            self.dst = np.fromiter((idx[x.dst] for x in trace.edges), dtype=np.int32, count=m)
        except KeyError as e:
            raise OrchestraceError(
                "OT202", f"edge endpoint {e.args[0]!r} is not an event id", pointer="/edges"
            ) from None
        self.etype = np.fromiter((EDGE_CODE[x.type] for x in trace.edges), dtype=np.int8, count=m)
        self._adj: dict[tuple[frozenset[int] | None, bool], csr_matrix] = {}

    # ------------------------------------------------------------ selection helpers

    def mask(self, *event_types: str) -> np.ndarray:
        """Boolean mask of events of the given types."""
        return np.isin(self.type, [EVENT_CODE[t] for t in event_types])

    def nodes(self, *event_types: str) -> np.ndarray:
        return np.nonzero(self.mask(*event_types))[0]

    def edge_mask(self, types: Iterable[str] | None) -> np.ndarray:
        if types is None:
            return np.ones(len(self.src), dtype=bool)
        return np.isin(self.etype, [EDGE_CODE[t] for t in types])

    def adjacency(self, types: Iterable[str] | None = None, *, reverse: bool = False) -> csr_matrix:
        """CSR adjacency (row = source) over the chosen edge types; cached."""
        key = (None if types is None else frozenset(EDGE_CODE[t] for t in types), reverse)
        a = self._adj.get(key)
        if a is None:
            sel = self.edge_mask(types)
            s, d = self.src[sel], self.dst[sel]
            if reverse:
                s, d = d, s
            a = csr_matrix((np.ones(len(s), dtype=np.int8), (s, d)), shape=(self.n, self.n))
            a.sum_duplicates()
            self._adj[key] = a
        return a

    def successors(self, i: int, types: Iterable[str] | None = None) -> np.ndarray:
        a = self.adjacency(types)
        return a.indices[a.indptr[i] : a.indptr[i + 1]]

    def predecessors(self, i: int, types: Iterable[str] | None = None) -> np.ndarray:
        a = self.adjacency(types, reverse=True)
        return a.indices[a.indptr[i] : a.indptr[i + 1]]

    # ------------------------------------------------------------ order and reachability

    @cached_property
    def topo_order(self) -> np.ndarray:
        """A topological order of all nodes over all edges (ties broken by time, then index)."""
        order = np.lexsort((np.arange(self.n), self.t))
        pos = np.empty(self.n, dtype=np.int64)
        pos[order] = np.arange(self.n)
        if not len(self.src) or bool(np.all(pos[self.src] < pos[self.dst])):
            return order
        return kahn_order(self.adjacency(), self.t, what="edges")

    def reachable(
        self,
        sources: Sequence[int] | np.ndarray,
        types: Iterable[str] | None = None,
        *,
        reverse: bool = False,
    ) -> np.ndarray:
        """Mask of nodes reachable from any source (sources included) along the edge types."""
        src = np.asarray(sources, dtype=np.int64)
        out = np.zeros(self.n, dtype=bool)
        if not len(src):
            return out
        a = self.adjacency(types, reverse=reverse)
        if len(src) == 1:
            out[breadth_first_order(a, int(src[0]), directed=True, return_predecessors=False)] = True
            return out
        # one virtual super-source joined to every source
        n = self.n
        rows = np.concatenate([np.repeat(np.arange(n), np.diff(a.indptr)), np.full(len(src), n)])
        cols = np.concatenate([a.indices, src])
        big = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(n + 1, n + 1))
        seen = breadth_first_order(big, n, directed=True, return_predecessors=False)
        out[seen[seen < n]] = True
        return out

    def longest_path(self, weight: np.ndarray, types: Iterable[str] | None = None) -> tuple[float, list[int]]:
        """Heaviest path through the DAG (node weights); returns (total weight, node path)."""
        n = self.n
        if n == 0:
            return 0.0, []
        a = self.adjacency(types, reverse=True)  # predecessors
        best = np.asarray(weight, dtype=np.float64).copy()
        prev = np.full(n, -1, dtype=np.int64)
        indptr, indices = a.indptr, a.indices
        w = np.asarray(weight, dtype=np.float64)
        for v in self.topo_order.tolist():
            lo, hi = indptr[v], indptr[v + 1]
            if lo == hi:
                continue
            preds = indices[lo:hi]
            k = int(np.argmax(best[preds]))
            best[v] = w[v] + best[preds[k]]
            prev[v] = preds[k]
        end = int(np.argmax(best))
        path = [end]
        while prev[path[-1]] >= 0:
            path.append(int(prev[path[-1]]))
        path.reverse()
        return float(best[end]), path


def kahn_order(a: csr_matrix, t: np.ndarray, *, what: str, break_cycles: bool = False) -> np.ndarray:
    """Topological order of adjacency ``a`` (row = source): ``order.topological_order``, ready
    nodes in time order, then by index; OT203 naming ``what`` on a cycle unless ``break_cycles``."""
    indptr, indices = a.indptr.tolist(), a.indices.tolist()
    successors = [indices[indptr[v] : indptr[v + 1]] for v in range(a.shape[0])]
    by_time = np.lexsort((np.arange(a.shape[0]), np.asarray(t, dtype=np.float64))).tolist()
    order = topological_order(successors, by_time, what=what, break_cycles=break_cycles)
    return np.asarray(order, dtype=np.int64)
