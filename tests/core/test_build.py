"""core.build.TraceBuilder: the edges it adds, written out by hand."""

from __future__ import annotations

from orchestrace.core.build import TraceBuilder, infer_edge_type
from orchestrace.core.model import Edge, Event
from orchestrace.core.validate import validate_trace


def _ev(eid: str, agent: str, type: str = "message", t: float = 0.0) -> Event:
    return Event(id=eid, t=t, type=type, agent=agent)


def test_after_edges_point_at_the_added_event_in_the_given_order():
    b = TraceBuilder()
    assert b.add(_ev("a", "x")) == "a"
    b.add(_ev("b", "y"))
    assert b.add(_ev("c", "z"), ("b", "message"), ("a", "causal")) == "c"
    assert b.edges == [Edge("b", "c", "message"), Edge("a", "c", "causal")]


def test_chain_links_an_agents_previous_event_first_unless_it_is_already_a_source():
    b = TraceBuilder()
    b.add(_ev("a1", "a"), chain="causal")  # first event of a: nothing to chain
    b.add(_ev("b1", "b"), chain="causal")
    b.add(_ev("a2", "a"), ("b1", "message"), chain="causal")
    b.add(_ev("a3", "a"), ("a2", "tool_dependency"), chain="causal")  # a2 already a source
    b.add(_ev("a4", "a"))  # no chain asked
    assert b.edges == [
        Edge("a1", "a2", "causal"),
        Edge("b1", "a2", "message"),
        Edge("a2", "a3", "tool_dependency"),
    ]
    assert (b.last("a"), b.last("b"), b.last("c")) == ("a4", "b1", None)


def test_trace_is_a_snapshot_with_the_given_top_level_fields():
    b = TraceBuilder()
    b.add(_ev("d", "o", "orchestrator_decision"))
    b.add(_ev("s", "o", "spawn", t=1.0), ("d", "causal"))
    tr = b.trace(
        trace_id="t",
        task_id="k",
        system="test",
        rewards={"team": 1.0},
        costs={"tokens": 0, "wall_clock_s": 1.0},
    )
    b.add(_ev("later", "o", t=2.0), ("s", "causal"))
    b.edge("d", "later", "causal")
    assert [e.id for e in tr.events] == ["d", "s"]
    assert tr.edges == [Edge("d", "s", "causal")]
    assert (tr.trace_id, tr.task_id, tr.system, tr.rewards) == ("t", "k", "test", {"team": 1.0})
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    assert b.edges[-1] == Edge("d", "later", "causal")


def test_append_takes_edges_already_made_and_counts_for_the_chain():
    b = TraceBuilder()
    b.append(_ev("a1", "a"), [])
    b.append(_ev("b1", "b"), [Edge("a1", "b1", "spawn")])
    b.add(_ev("a2", "a"), chain="causal")
    assert b.edges == [Edge("a1", "b1", "spawn"), Edge("a1", "a2", "causal")]
    assert [e.id for e in b.events] == ["a1", "b1", "a2"]


def test_inferred_edge_types_follow_the_joined_event_types():
    cases = {
        ("orchestrator_decision", "spawn"): "spawn",
        ("tool_call", "tool_result"): "return",
        ("message", "tool_call"): "tool_dependency",
        ("return", "aggregate"): "aggregate",
        ("return", "message"): "return",
        ("safety_event", "message"): "safety_flow",
        ("message", "orchestrator_decision"): "message",
        ("orchestrator_decision", "message"): "causal",
    }
    assert {k: infer_edge_type(*k) for k in cases} == cases
