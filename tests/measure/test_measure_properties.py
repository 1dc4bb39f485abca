"""Properties on random valid traces, generator traces and traces imported from real logs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from measure_kit import assert_unclamped_invariants
from tracekit import ev, mk

from orchestrace.core import io
from orchestrace.core.model import EDGE_TYPES
from orchestrace.core.validate import validate_trace
from orchestrace.gen import GEN_TOPOLOGIES, generate
from orchestrace.measure import (
    REPORT_KEYS,
    TraceView,
    analyze,
    breakdown,
    critical_path,
    step_weights,
    taint,
    write_metrics,
)

AGENTS = ("o", "a", "b")


TYPES = ("orchestrator_decision", "message", "tool_call", "aggregate", "safety_event", "human_intervention")


@st.composite
def traces(draw):
    n = draw(st.integers(1, 25))
    unit = draw(st.sampled_from((1, 0.1, 0.3)))  # tenths: sums that round in floating point
    times = [k * unit for k in sorted(draw(st.lists(st.integers(0, 12), min_size=n, max_size=n)))]
    events = []
    for i, t in enumerate(times):
        ty = draw(st.sampled_from(TYPES))
        dur = draw(st.one_of(st.none(), st.integers(0, 6)))
        kw = {"t_end": t + dur * unit} if dur is not None else {}
        if ty == "message":
            kw["to"] = draw(st.sampled_from(AGENTS))
        if ty == "tool_call":
            kw["tool"], kw["call_id"] = "x", f"c{i}"
        kw["trusted"] = draw(st.sampled_from((None, True, False)))
        kw["status"] = draw(st.sampled_from((None, "ok", "error")))
        kw["tokens_in"] = draw(st.integers(0, 50))
        events.append(ev(f"e{i}", t, ty, draw(st.sampled_from(AGENTS)), **kw))
    # each tool call may get a result later, from the tool (a name shared by concurrent calls) or
    # from the caller, with or without a duration of its own
    results, caller = [], []
    for i, e in enumerate(list(events)):
        if e.type == "tool_call" and draw(st.booleans()):
            t = e.t + draw(st.integers(0, 8)) * unit
            dur = draw(st.one_of(st.none(), st.integers(0, 3)))
            who = draw(st.sampled_from(("x", e.agent)))
            kw = {"t_end": t + dur * unit} if dur is not None else {}
            events.append(ev(f"r{i}", t, "tool_result", who, tool="x", call_id=f"c{i}", **kw))
            times.append(t)
            results.append((f"e{i}", f"r{i}", "tool_dependency"))
            caller.append(i)
    ids = [e.id for e in events]
    # edges go forward in (time, random tie-break): equal-time edges may point to a lower index;
    # a result comes right after its call in the tie-break
    tie = [*draw(st.permutations(range(n))), *(0.0,) * len(caller)]
    for k, i in enumerate(caller):
        tie[n + k] = tie[i] + 0.5
    n = len(events)
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    edges = results + [
        (ids[i], ids[j], draw(st.sampled_from(EDGE_TYPES)))
        for i, j in pairs
        if (times[i], tie[i]) < (times[j], tie[j])
    ]
    return mk(events, list(dict.fromkeys(edges)))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_invariants_on_random_valid_traces(tr):
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []
    r = analyze(tr)
    assert_unclamped_invariants(tr, r)
    assert r["critical_path_s"] <= r["wall_clock_s"] + 1e-9
    assert 0 <= r["critical_steps"] <= r["total_steps"]
    # every agent's own steps lie on one chain (program order), so none exceeds the critical steps
    w = step_weights(tr)
    per_agent = {a: w[[i for i, e in enumerate(tr.events) if e.agent == a]].sum() for a in AGENTS}
    assert r["critical_steps"] >= max(per_agent.values())
    # E4 against a brute-force walk of the same dependencies: an error is initial when no other
    # error reaches it; the others are downstream, shared over the initial ones
    v = TraceView(tr)
    children: dict[int, set[int]] = {}
    for a, b in zip(*v.dep_edges, strict=True):
        children.setdefault(int(a), set()).add(int(b))
    bad = {i for i, e in enumerate(tr.events) if e.status == "error"}  # the only flag drawn here
    reached: set[int] = set()
    stack = [c for i in bad for c in children.get(i, ())]
    while stack:
        i = stack.pop()
        if i not in reached:
            reached.add(i)
            stack.extend(children.get(i, ()))
    initial = len(bad - reached)
    assert (r["corrupted_events"], r["initial_corrupted"]) == (len(bad), initial)
    assert r["error_amplification"] == (len(bad) - initial) / max(1, initial)
    if r["tainted_decisions"] is not None:
        assert r["taint_reach"] <= 1.0
    assert sum(b["events"] for b in breakdown(tr, "agent").values()) == len(tr.events)
    write_metrics(tr, r)
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.data())
def test_taint_is_monotone_in_added_untrusted_sources(tr, data):
    v = TraceView(tr)
    base = np.asarray(data.draw(st.lists(st.booleans(), min_size=v.n, max_size=v.n)), dtype=bool)
    extra = np.asarray(data.draw(st.lists(st.booleans(), min_size=v.n, max_size=v.n)), dtype=bool)
    small, big = taint(v, base), taint(v, base | extra)
    assert not (small.reached & ~big.reached).any()
    assert set(small.tainted_decisions.tolist()) <= set(big.tainted_decisions.tolist())


@pytest.mark.parametrize("topology", GEN_TOPOLOGIES)
def test_generator_traces(topology):
    tr = generate(seed=7, size=400, topology=topology)
    r = analyze(tr)
    assert set(REPORT_KEYS) <= set(r)
    assert_unclamped_invariants(tr, r)
    assert r["critical_path_s"] <= r["wall_clock_s"] + 1e-9
    assert r["protocol_overhead"] is not None and 0 < r["protocol_overhead"] <= 1
    assert r["tainted_decisions"] is not None  # the generator marks web results untrusted
    if topology in ("centralized", "hierarchical", "swarm"):
        assert r["max_concurrency"] > 2 and r["parallel_speedup"] > 1.2
    if topology == "harness":
        assert r["max_concurrency"] == 1 and r["parallel_speedup"] == pytest.approx(1.0)
    if topology == "debate":
        assert r["debate_resolved"] == 1.0  # the generator records attrs.resolved on the aggregate
    write_metrics(tr, r)
    assert validate_trace(io.loads(io.dumps(tr))) == []


def test_overlapping_dependencies_do_not_stretch_the_critical_path():
    # two parallel tool calls chained by program order: the second starts while the first runs
    tr = mk(
        [
            ev("a", 0, "tool_call", "o", t_end=10, tool="x"),
            ev("b", 1, "tool_call", "o", t_end=2, tool="y"),
            ev("c", 2, "message", "o", t_end=12, to="o"),
        ]
    )
    cp = critical_path(tr)
    assert cp["length_s"] == 12.0  # not 10 + 1 + 10
    # effective intervals a [0, 10], b [0, 2] (charged from a's start), c [2, 12] (from b's end):
    # one agent, busy on their union [0, 12]
    assert cp["serial_work_s"] == 12.0


def test_undelivered_return_reaches_the_recipients_next_event():
    tr = mk(
        [
            ev("d", 0, "orchestrator_decision", "o"),
            ev("s", 1, "spawn", "o", to="w"),
            ev("w1", 2, "tool_call", "w", t_end=6, tool="x"),
            ev("r", 6, "return", "w", to="o"),
            ev("o2", 3, "orchestrator_decision", "o"),  # before the return: not its consumer
            ev("o3", 7, "orchestrator_decision", "o"),  # the consumer
        ],
        [("d", "s", "spawn"), ("s", "w1", "spawn")],
    )
    v = TraceView(tr)
    assert [(tr.events[a].id, tr.events[b].id) for a, b in zip(*v.delivery, strict=True)] == [("r", "o3")]
    r = analyze(v)
    assert r["useful_agent_utilization"] == 1.0
    assert r["critical_path_s"] == 7.0  # d, s, w1 (1..6), r, o3 (6..7)


# ---------------------------------------------------------------- real logs (vendored, tests/data/public)


def _imported(path: Path, fmt: str):
    from orchestrace import importers

    return list(importers.load(path, fmt))  # named format: detection imports every importer


def test_claude_code_orchestrator_with_six_teammates(public_excerpt):
    (tr,) = _imported(
        public_excerpt
        / "claude-code/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl",
        "claude-code",
    )
    r = analyze(tr)
    assert r["spawned_agents"] == 6 and r["useful_agent_utilization"] == 1.0
    assert r["max_concurrency"] >= 4  # main + three teammates per wave
    assert_unclamped_invariants(tr, r)
    assert r["parallel_speedup"] > 1.0 and r["critical_path_s"] <= r["wall_clock_s"]
    assert r["critical_steps"] < r["total_steps"]
    assert r["tokens"] > 0 and 0 < r["protocol_overhead"] < 1
    assert r["corrupted_events"] >= 1  # failed tool results are in the log
    write_metrics(tr, r)
    assert [f for f in validate_trace(tr) if f.severity == "error"] == []


@pytest.mark.parametrize(
    "rel", ["who-and-when/Who&When/Hand-Crafted/1.json", "who-and-when/Who&When/Algorithm-Generated/1.json"]
)
def test_who_and_when_runs(rel, public_excerpt):
    for tr in _imported(public_excerpt / rel, "who-and-when"):
        r = analyze(tr)
        assert r["events"] == len(tr.events) and r["critical_steps"] >= 1
        assert_unclamped_invariants(tr, r)


def test_chatdev_and_codex_logs(public_excerpt):
    logs = sorted(public_excerpt.glob("chatdev/WareHouse/*/*.log")) + sorted(
        public_excerpt.glob("codex/*.jsonl")
    )
    assert len(logs) == 3
    for p in logs:
        for tr in _imported(p, "codex" if p.suffix == ".jsonl" else "chatdev"):
            r = analyze(tr)
            assert r["tokens"] > 0 and r["protocol_overhead"] is not None
            assert_unclamped_invariants(tr, r)
            assert r["critical_path_s"] <= r["wall_clock_s"] + 1e-9
            assert r["critical_steps"] <= r["total_steps"]
            assert r["message_redundancy"] is not None
