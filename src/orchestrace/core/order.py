"""The one topological order of the package: Kahn's algorithm over adjacency lists, in plain
Python. ``core.graph`` orders trace graphs with it (from their sparse adjacency) and the importers
their staged dependencies, without scipy on the import path (an imported trace has tens to
thousands of events, where building sparse matrices costs more than the walk).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

from .errors import OrchestraceError


def topological_order(
    successors: Sequence[Sequence[int]],
    preferred: Sequence[int] | None = None,
    *,
    what: str = "edges",
    break_cycles: bool = False,
) -> list[int]:
    """Nodes in dependency order; ``successors[v]``: the nodes with an edge from ``v``. Of the
    nodes ready at once, the first in ``preferred`` (every node once, e.g. by time) goes first;
    without it the lowest index. A cycle is OT203 naming ``what`` (edges, dependencies), or with
    ``break_cycles`` (a foreign log being imported may hold one) the first pending node in that
    order is released as if its in-edges were gone."""
    if preferred is None:
        return _by_index(successors, what, break_cycles)
    rank = [0] * len(successors)
    for r, v in enumerate(preferred):
        rank[v] = r
    # renumbered so that index order is the preferred order: the walk compares ints only
    renumbered = [[rank[w] for w in successors[v]] for v in preferred]
    return [preferred[r] for r in _by_index(renumbered, what, break_cycles)]


def _by_index(successors: Sequence[Sequence[int]], what: str, break_cycles: bool) -> list[int]:
    """Kahn's algorithm, the lowest ready index first."""
    n = len(successors)
    deg = [0] * n
    for ws in successors:
        for w in ws:
            deg[w] += 1
    heap = [i for i in range(n) if deg[i] == 0]  # ascending: already a heap
    done = [False] * n
    out: list[int] = []
    nxt = 0  # every index below it is done: where the earliest pending node is
    while len(out) < n:
        if not heap:
            if not break_cycles:
                raise OrchestraceError(
                    "OT203", f"the trace's {what} contain a cycle; run `orchestrace validate`"
                )
            while done[nxt]:
                nxt += 1
            deg[nxt] = 0
            heap.append(nxt)
        v = heapq.heappop(heap)
        done[v] = True
        out.append(v)
        for w in successors[v]:
            deg[w] -= 1
            if deg[w] == 0 and not done[w]:
                heapq.heappush(heap, w)
    return out


def successor_lists(n: int, pairs: Iterable[tuple[int, int]]) -> list[list[int]]:
    """The successors of each of ``n`` nodes joined by ``(source, destination)`` pairs; a repeated
    pair is one edge."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in set(pairs):
        succ[a].append(b)
    return succ
