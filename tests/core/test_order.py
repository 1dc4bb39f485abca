"""The one topological order (core.order): ready nodes by a preferred order (here: time, then
index) or by index, cycles refused or
broken at the earliest pending node; orders written out by hand."""

from __future__ import annotations

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.core.order import successor_lists, topological_order


def _order(n: int, pairs: list[tuple[int, int]], t: list[float] | None = None, **kw: object) -> list[int]:
    by_time = None if t is None else sorted(range(n), key=lambda i: (t[i], i))
    return topological_order(successor_lists(n, pairs), by_time, **kw)  # type: ignore[arg-type]


def test_successor_lists_count_a_repeated_pair_once():
    assert [sorted(s) for s in successor_lists(3, [(2, 0), (0, 1), (0, 2), (0, 1)])] == [[1, 2], [], [0]]


def test_lowest_ready_index_first_without_times():
    assert _order(4, [(3, 0)]) == [1, 2, 3, 0]
    assert _order(5, [(0, 4), (4, 1)]) == [0, 2, 3, 4, 1]


def test_ready_nodes_taken_by_time_then_index():
    # 0 -> 2; 0, 1 and 3 are ready: 3 has the earliest time, 0 and 1 tie (the index decides), and
    # 2, ready once 0 is done, comes before 1 by its time
    assert _order(4, [(0, 2)], [1.0, 1.0, 0.5, 0.2]) == [3, 0, 2, 1]


def test_a_cycle_is_ot203_unless_broken_at_the_earliest_pending_node():
    with pytest.raises(OrchestraceError) as e:
        _order(3, [(1, 0), (0, 1)], what="dependencies")
    assert e.value.code == "OT203" and "dependencies contain a cycle" in str(e.value)
    assert _order(3, [(1, 0), (0, 1)], break_cycles=True) == [2, 0, 1]  # 2 is ready; then 0 breaks it
    # by time: 1 is the earliest pending node of the cycle, so it goes first
    assert _order(3, [(1, 0), (0, 1), (2, 0)], [0.5, 0.3, 0.1], break_cycles=True) == [2, 1, 0]
