"""The importers' plain-Python dependency order agrees with core.graph's Kahn order (scipy)."""

import random

import numpy as np
from scipy.sparse import csr_matrix

from orchestrace.core.graph import kahn_order
from orchestrace.importers._common import _dependency_order


def _by_kahn(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    src = np.array([a for a, _ in pairs], dtype=np.int64)
    dst = np.array([b for _, b in pairs], dtype=np.int64)
    adj = csr_matrix((np.ones(len(pairs), dtype=np.int32), (src, dst)), shape=(n, n))
    return kahn_order(adj, np.arange(n, dtype=np.float64), what="edges", break_cycles=True).tolist()


def test_same_order_as_kahn_with_repeats_self_loops_and_cycles() -> None:
    rng = random.Random(20)
    for _ in range(500):
        n = rng.randint(1, 25)
        pairs = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 50))]
        if rng.random() < 0.5:  # mostly forward, as a log's edges are, plus a few repeats
            pairs = [(min(a, b), max(a, b)) for a, b in pairs] + pairs[:3]
        assert _dependency_order(n, pairs) == _by_kahn(n, pairs), (n, pairs)


def test_lowest_ready_index_first_and_cycle_broken_at_earliest_event() -> None:
    assert _dependency_order(4, [(3, 0)]) == [1, 2, 3, 0]
    assert _dependency_order(3, [(1, 0), (0, 1)]) == [2, 0, 1]  # 2 is ready; then 0 breaks the cycle
