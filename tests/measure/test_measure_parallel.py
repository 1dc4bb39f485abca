"""E2: critical path, Critical Steps (Kimi's worked example, nested hierarchies), concurrency, utilisation."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from measure_kit import KIMI, KIMI_BALANCED, stages_trace
from tracekit import ev, mk

from orchestrace.core.validate import validate_trace
from orchestrace.measure import (
    TraceView,
    analyze,
    breakdown,
    concurrency,
    concurrency_profile,
    critical_path,
    critical_steps,
    kimi_critical_steps,
    kimi_total_steps,
    step_weights,
    useful_agents,
)


def test_kimi_formula_worked_example():
    # spec §2.3: 1 + (1 + 9) + 1 = 12 of 1 + 1 + 26 + 1 = 29; balanced {7,7,6,6}: 1 + (1 + 7) + 1 = 10
    assert kimi_total_steps(KIMI) == 29
    assert kimi_critical_steps(KIMI) == 12
    assert kimi_total_steps(KIMI_BALANCED) == 29
    assert kimi_critical_steps(KIMI_BALANCED) == 10


def test_kimi_worked_example_as_trace():
    tr = stages_trace(KIMI)
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    cs = critical_steps(tr)
    assert (cs["critical"], cs["total"]) == (12, 29)
    # the critical path runs through the 9-step sub-agent (main.1)
    agents = {tr.events[i].agent for i in cs["path"]}
    assert "main.1" in agents and not agents & {"main.0", "main.2", "main.3"}
    # unit-length steps scheduled as early as possible: wall-clock equals steps
    cp = critical_path(tr)
    assert cp["length_s"] == pytest.approx(12.0)
    assert cp["serial_work_s"] == pytest.approx(29.0)
    r = analyze(tr)
    assert r["parallel_speedup"] == pytest.approx(29 / 12)
    assert r["step_parallelism"] == pytest.approx(29 / 12)
    assert r["useful_agent_utilization"] == 1.0
    assert r["max_concurrency"] == 5  # main + 4 sub-agents


def test_kimi_balanced_as_trace():
    cs = critical_steps(stages_trace(KIMI_BALANCED))
    assert (cs["critical"], cs["total"]) == (10, 29)


def test_nested_sub_agent_contributes_its_own_critical_steps():
    # sub-agent 0 spawns its own group {3, 5} in its first stage, then returns:
    # its critical steps = 1 + 5 + 1 = 7 > the flat sub-agent's 4; top = 1 + (1 + 7) + 1 = 10
    nested = [(1, [3, 5]), (1, [])]
    stages = [(1, []), (1, [nested, 4]), (1, [])]
    assert kimi_critical_steps(nested) == 7
    assert kimi_critical_steps(stages) == 10
    assert kimi_total_steps(stages) == 1 + 1 + (1 + 3 + 5 + 1) + 4 + 1
    tr = stages_trace(stages)
    assert validate_trace(tr) == []
    cs = critical_steps(tr)
    assert (cs["critical"], cs["total"]) == (10, 17)
    assert {"main.0", "main.0.1"} <= {tr.events[i].agent for i in cs["path"]}


def _stages(depth: int):
    sub = st.integers(1, 5) if depth == 0 else st.one_of(st.integers(1, 5), _stages(depth - 1))
    stage = st.tuples(st.integers(1, 3), st.lists(sub, max_size=3))
    return st.lists(stage, min_size=1, max_size=3).map(lambda s: [*s[:-1], (s[-1][0], [])])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_stages(2))
def test_trace_critical_steps_equal_kimi_formula_on_nested_stages(stages):
    tr = stages_trace(stages)
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    cs = critical_steps(tr)
    assert cs["critical"] == kimi_critical_steps(stages)
    assert cs["total"] == kimi_total_steps(stages)
    cp = critical_path(tr)
    assert cp["length_s"] == pytest.approx(cs["critical"])
    assert cp["serial_work_s"] == pytest.approx(cs["total"])


def test_spawn_group_and_parallel_tool_calls_are_one_step():
    tr = mk(
        [
            ev("d", 0, "orchestrator_decision", "o"),
            ev("s1", 1, "spawn", "o", to="a"),
            ev("s2", 1, "spawn", "o", to="b"),
            ev("c1", 2, "tool_call", "o", tool="x", call_id="1"),
            ev("c2", 2, "tool_call", "o", tool="y", call_id="2"),
            ev("r1", 3, "tool_result", "x", tool="x", call_id="1"),
            ev("r2", 3, "tool_result", "y", tool="y", call_id="2"),
            ev("c3", 4, "tool_call", "o", tool="x", call_id="3"),  # waits on r1: a new step
            ev("a1", 2, "message", "a", to="b"),
            ev("b1", 2, "message", "b", to="a"),
        ],
        [
            ("d", "s1", "spawn"),
            ("d", "s2", "spawn"),
            ("c1", "r1", "tool_dependency"),
            ("c2", "r2", "tool_dependency"),
            ("r1", "c3", "causal"),
            ("s1", "a1", "spawn"),
            ("s2", "b1", "spawn"),
        ],
    )
    assert validate_trace(tr) == []
    w = dict(zip([e.id for e in tr.events], step_weights(tr).tolist(), strict=True))
    assert w == {"d": 1, "s1": 0, "s2": 0, "c1": 1, "c2": 0, "r1": 0, "r2": 0, "c3": 1, "a1": 1, "b1": 1}


def test_effective_duration_charges_waiting_time_to_the_event():
    # instantaneous events 0 -> 5 -> 6 on one agent, plus a 2 s parallel branch on another agent
    tr = mk(
        [
            ev("a", 0, "orchestrator_decision", "o"),
            ev("s", 0, "spawn", "o", to="w"),
            ev("w1", 1, "tool_call", "w", t_end=3, tool="x"),
            ev("w2", 3, "tool_result", "w", tool="x"),
            ev("w3", 3, "return", "w", to="o"),
            ev("b", 5, "orchestrator_decision", "o"),
            ev("c", 6, "aggregate", "o"),
        ],
        [
            ("a", "s", "spawn"),
            ("s", "w1", "spawn"),
            ("w1", "w2", "tool_dependency"),
            ("w2", "w3", "causal"),
            ("w3", "c", "return"),
            ("b", "c", "causal"),
        ],
    )
    assert validate_trace(tr) == []
    v = TraceView(tr)
    eff = dict(zip([e.id for e in tr.events], v.effective_duration.tolist(), strict=True))
    # w1 waited from the spawn (t=0) to its end (3); b from the spawn to 5; c from b (5) to 6
    assert eff == {"a": 0, "s": 0, "w1": 3, "w2": 0, "w3": 0, "b": 5, "c": 1}
    cp = critical_path(v)
    assert cp["length_s"] == 6.0 and cp["serial_work_s"] == 9.0
    assert [tr.events[i].id for i in cp["path"]] == ["a", "s", "b", "c"]


def test_concurrency_hand_computed():
    # o: 0..10; a spawned at 1, last event ends 4; b spawned at 2, ends 8 (despawned at 9)
    tr = mk(
        [
            ev("d", 0, "orchestrator_decision", "o"),
            ev("sa", 1, "spawn", "o", to="a"),
            ev("sb", 2, "spawn", "o", to="b"),
            ev("a1", 3, "message", "a", t_end=4, to="o"),
            ev("b1", 5, "message", "b", t_end=8, to="o"),
            ev("x", 9, "despawn", "o", to="b"),
            ev("z", 10, "aggregate", "o"),
        ],
        [("d", "sa", "spawn"), ("d", "sb", "spawn"), ("sa", "a1", "spawn"), ("sb", "b1", "spawn")],
    )
    assert validate_trace(tr) == []
    c = concurrency(tr)
    times, active = concurrency_profile(tr)
    # starts: o 0, a 1, b 2; ends: a 4, b 9 (despawn), o 10
    assert times.tolist() == [0, 1, 2, 4, 9, 10] and active.tolist() == [1, 2, 3, 2, 1, 0]
    assert c["max"] == 3
    assert c["mean"] == pytest.approx((10 + 3 + 7) / 10)


def test_useful_agents_need_a_return_that_reaches_the_final_node():
    tr = mk(
        [
            ev("d", 0, "orchestrator_decision", "o"),
            ev("sa", 1, "spawn", "o", to="a"),
            ev("sb", 1, "spawn", "o", to="b"),
            ev("sc", 1, "spawn", "o", to="c"),
            ev("ra", 2, "return", "a", to="o"),
            ev("rb", 2, "return", "b", to="o"),  # returned but never aggregated: idle
            ev("m", 2, "message", "c", to="o"),  # talked, never returned
            ev("agg", 3, "aggregate", "o"),
        ],
        [
            ("d", "sa", "spawn"),
            ("d", "sb", "spawn"),
            ("d", "sc", "spawn"),
            ("sa", "ra", "spawn"),
            ("sb", "rb", "spawn"),
            ("sc", "m", "spawn"),
            ("ra", "agg", "aggregate"),
        ],
    )
    assert validate_trace(tr) == []
    assert useful_agents(tr) == {"a": True, "b": False, "c": False}
    assert analyze(tr)["useful_agent_utilization"] == pytest.approx(1 / 3)
    no_spawn = mk([ev("a", 0, "tool_call", "o", tool="x"), ev("b", 1, "tool_result", "x", tool="x")])
    assert analyze(no_spawn)["useful_agent_utilization"] is None


def test_cross_agent_temporal_edge_is_not_a_dependency():
    tr = mk(
        [ev("a", 0, "message", "p", t_end=5, to="q"), ev("b", 0, "message", "q", t_end=5, to="p")],
        [("a", "b", "temporal")],
    )
    r = analyze(tr)
    assert r["critical_path_s"] == 5.0 and r["serial_work_s"] == 10.0 and r["parallel_speedup"] == 2.0


def test_no_time_gives_null_efficiency():
    tr = mk([ev("a", 0, "orchestrator_decision", "o"), ev("b", 0, "aggregate", "o")])
    r = analyze(tr)
    assert r["critical_path_s"] == 0.0 and r["parallel_speedup"] is None
    assert r["critical_steps"] == 2


def test_a_lone_agents_overlapping_events_are_serial_work_once():
    # one agent, events [0, 10], [1, 4], [5, 9]; effective intervals [0, 10], [0, 4] (b started while
    # a ran: charged from a's start), [4, 9] (c waited for b's end). Busy on their union [0, 10]:
    # serial work 10 s (not 10 + 4 + 5 = 19), critical path 10 s, speed-up 1.0
    tr = mk(
        [
            ev("a", 0, "orchestrator_decision", "o", t_end=10),
            ev("b", 1, "orchestrator_decision", "o", t_end=4),
            ev("c", 5, "orchestrator_decision", "o", t_end=9),
        ]
    )
    cp = critical_path(tr)
    assert (cp["serial_work_s"], cp["length_s"]) == (10.0, 10.0)
    assert analyze(tr)["parallel_speedup"] == 1.0


def test_a_decision_and_its_direct_tool_call_are_one_step_like_a_decision_and_its_spawns():
    # Kimi's stages: (tool call: 1), (spawn: 1 + sub-agent 1), (final decision: 1) = 4 critical steps
    tr = mk(
        [
            ev("d1", 0, "orchestrator_decision", "o"),
            ev("c1", 1, "tool_call", "o", tool="x", call_id="1"),
            ev("r1", 2, "tool_result", "x", tool="x", call_id="1"),
            ev("d2", 3, "orchestrator_decision", "o"),
            ev("s1", 4, "spawn", "o", to="w"),
            ev("w1", 5, "return", "w", to="o"),
            ev("d3", 6, "orchestrator_decision", "o"),
        ],
        [
            ("c1", "r1", "tool_dependency"),
            ("r1", "d2", "causal"),
            ("d2", "s1", "spawn"),
            ("s1", "w1", "spawn"),
            ("w1", "d3", "return"),
        ],
    )
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    w = dict(zip([e.id for e in tr.events], step_weights(tr).tolist(), strict=True))
    assert w == {"d1": 1, "c1": 0, "r1": 0, "d2": 1, "s1": 0, "w1": 1, "d3": 1}
    cs = critical_steps(tr)
    assert (cs["critical"], cs["total"]) == (4, 4)


def _fan_out_search(result_agent: str | None):
    """o decides [0, 1]; workers w0..w2 each call web_search at 1, results at 11; o aggregates [11, 12]."""
    events = [ev("d", 0, "orchestrator_decision", "o", t_end=1)]
    edges = []
    for k in range(3):
        w = f"w{k}"
        events += [
            ev(f"s{k}", 1, "spawn", "o", to=w),
            ev(f"c{k}", 1, "tool_call", w, tool="web_search", call_id=f"q{k}"),
            ev(f"r{k}", 11, "tool_result", result_agent or w, tool="web_search", call_id=f"q{k}"),
        ]
        edges += [("d", f"s{k}", "spawn"), (f"s{k}", f"c{k}", "spawn"), (f"c{k}", f"r{k}", "tool_dependency")]
        edges.append((f"r{k}", "agg", "causal"))
    events.append(ev("agg", 11, "aggregate", "o", t_end=12))
    return mk(events, edges)


@pytest.mark.parametrize("result_agent", ["web_search", None])
def test_agents_sharing_a_tool_each_do_their_own_work(result_agent):
    # issue 34: the results' agent was the tool, shared by the three calls, which counted 10 s
    # once: serial 12 s, speed-up 1.0. Each execution is its own: 1 + 3 x 10 + 1 = 32 s, speed-up 32/12
    tr = _fan_out_search(result_agent)
    assert validate_trace(tr) == []
    r = analyze(tr)
    assert r["critical_path_s"] == 12.0
    assert r["serial_work_s"] == 32.0
    assert r["parallel_speedup"] == 32 / 12
    busy = {a: row["busy_s"] for a, row in breakdown(tr, "agent").items()}
    if result_agent:  # the tool's row holds its three executions; the workers only called
        assert busy == {"o": 2.0, "w0": 0.0, "w1": 0.0, "w2": 0.0, "web_search": 30.0}
    else:
        assert busy == {"o": 2.0, "w0": 10.0, "w1": 10.0, "w2": 10.0}


@pytest.mark.parametrize("result_agent", ["web_search", "a"])
def test_one_agents_parallel_tool_calls_add_up(result_agent):
    # two searches issued together, 3 s and 5 s: a serial executor runs one after the other
    tr = mk(
        [
            ev("c1", 0, "tool_call", "a", tool="web_search", call_id="1"),
            ev("c2", 0, "tool_call", "a", tool="web_search", call_id="2"),
            ev("r1", 3, "tool_result", result_agent, tool="web_search", call_id="1"),
            ev("r2", 5, "tool_result", result_agent, tool="web_search", call_id="2"),
        ],
        [("c1", "r1", "tool_dependency"), ("c2", "r2", "tool_dependency")],
    )
    assert validate_trace(tr) == []
    r = analyze(tr)
    assert (r["serial_work_s"], r["critical_path_s"], r["parallel_speedup"]) == (8.0, 5.0, 1.6)
    assert sum(row["busy_s"] for row in breakdown(tr, "agent").values()) == 8.0


def test_waiting_on_ones_own_tool_is_counted_once():
    # one agent, one call after the other, each next call chained to the previous call (not to
    # its result, as generated and imported traces often are): its interval spans the wait,
    # which is the tool's work; nothing ran in parallel, so the speed-up is exactly 1
    tr = mk(
        [
            ev("c1", 0, "tool_call", "a", t_end=1, tool="x", call_id="1"),
            ev("r1", 1, "tool_result", "a", t_end=3, tool="x", call_id="1"),
            ev("c2", 3, "tool_call", "a", t_end=4, tool="x", call_id="2"),
            ev("r2", 4, "tool_result", "a", t_end=6, tool="x", call_id="2"),
            ev("m", 6, "message", "a", t_end=7, to="user"),
        ],
        [("c1", "r1", "tool_dependency"), ("c2", "r2", "tool_dependency")],
    )
    r = analyze(tr)
    assert (r["serial_work_s"], r["critical_path_s"], r["parallel_speedup"]) == (7.0, 7.0, 1.0)
    busy = dict(zip([e.id for e in tr.events], TraceView(tr).busy_time.tolist(), strict=True))
    assert busy == {"c1": 1.0, "r1": 2.0, "c2": 1.0, "r2": 2.0, "m": 1.0}
