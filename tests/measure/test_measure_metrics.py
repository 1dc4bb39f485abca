"""E1, E3, E4 and safety on hand-built traces with hand-computed answers; the reference example."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest
from tracekit import ev, mk

from orchestrace.core import io
from orchestrace.core.validate import validate_trace
from orchestrace.measure import (
    REPORT_KEYS,
    TraceView,
    analyze,
    breakdown,
    debate,
    error_amplification,
    message_redundancy,
    messages_per_delegation,
    protocol_overhead,
    safety_metrics,
    taint,
    taint_flows,
    task_success,
    write_metrics,
)

# ---------------------------------------------------------------- the reference example


def test_reference_example(reference_example):
    tr = io.load_one(reference_example)
    r = analyze(tr)
    assert set(REPORT_KEYS) <= set(r)
    # ordinal t, no t_end: each event is charged the gap since its inputs were ready -> a sequential 7 s
    assert r["critical_path_s"] == 7.0 and r["serial_work_s"] == 7.0 and r["parallel_speedup"] == 1.0
    # steps: decision (spawn group continues it), message, tool_call, return, aggregate
    assert r["critical_steps"] == 5 and r["total_steps"] == 5
    assert r["task_success"] == 1.0
    assert r["protocol_overhead"] == 0.18  # no per-event tokens: the recorded value
    assert r["error_amplification"] == 0.0  # nothing corrupted -> 0 (the example's own value)
    assert (
        r["useful_agent_utilization"] == 0.5
    )  # executor_1 returns into the aggregate; planner_1 never returns
    assert r["max_concurrency"] == 3  # orchestrator, planner_1, executor_1; the tool is no agent
    assert r["tainted_decisions"] == 1
    flows = taint_flows(tr)
    assert flows == [
        {
            "decision": "e8",
            "type": "aggregate",
            "agent": "orchestrator",
            "final": True,
            "source": "e6",
            "path": ["e6", "e7", "e8"],
            "attack_vectors": ["AV2", "AV6"],
        }
    ]


def test_write_metrics_keeps_the_trace_valid(reference_example):
    tr = io.load_one(reference_example)
    write_metrics(tr, analyze(tr))
    m = tr.metrics
    assert m["task_success"] == 1.0 and m["error_amplification"] == 0.0 and m["protocol_overhead"] == 0.18
    # our parallel_speedup is written under the reference schema's key, and only there
    assert m["parallelism_efficiency"] == 1.0 and "orchestrace.parallel_speedup" not in m
    assert m["orchestrace.critical_steps"] == 5.0 and m["orchestrace.tainted_decisions"] == 1.0
    assert "orchestrace.debate_consensus" not in m  # nulls are not written
    assert all(isinstance(x, float) and math.isfinite(x) for x in m.values())
    assert validate_trace(io.loads(io.dumps(tr))) == []


# ---------------------------------------------------------------- E4: error amplification


def _errors_trace(statuses: dict[str, str]) -> object:
    # a -> b -> c on agent w (tool chain), d independent on agent v, e downstream of d via a message
    es = [
        ev("a", 0, "tool_call", "w", tool="x"),
        ev("b", 1, "tool_result", "w", tool="x"),
        ev("c", 2, "message", "w", to="v"),
        ev("d", 0, "tool_call", "v", tool="y"),
        ev("e", 3, "message", "v", to="w"),
    ]
    es = [msgspec.structs.replace(e, status=statuses[e.id]) if e.id in statuses else e for e in es]
    return mk(es, [("a", "b", "tool_dependency"), ("b", "c", "causal"), ("c", "e", "message")])


def test_error_amplification_hand_computed():
    assert error_amplification(_errors_trace({}))["error_amplification"] == 0.0
    one = error_amplification(_errors_trace({"a": "error", "c": "error", "e": "error"}))
    assert one == {"error_amplification": 2.0, "corrupted": 3.0, "initial": 1.0, "downstream": 2.0}
    # d is a second, independent first error (e also descends from c, so it is downstream)
    two = error_amplification(_errors_trace({"a": "error", "d": "error", "e": "error"}))
    assert two["initial"] == 2.0 and two["downstream"] == 1.0 and two["error_amplification"] == 0.5
    # an explicit flag counts too
    tr = mk(
        [ev("a", 0, "tool_result", "x", tool="x", attrs={"is_error": True}), ev("b", 1, "aggregate", "o")],
        [("a", "b", "causal")],
    )
    assert error_amplification(tr)["corrupted"] == 1.0


# ---------------------------------------------------------------- E4: protocol overhead and costs


def _cost_trace():
    return mk(
        [
            ev("d", 0, "orchestrator_decision", "o", role="lead", tokens_in=100, tokens_out=20),
            ev("s", 1, "spawn", "o", role="lead", to="w"),
            ev(
                "c",
                2,
                "tool_call",
                "w",
                role="worker",
                tool="web",
                tokens_in=300,
                tokens_out=50,
                cost_usd=0.01,
            ),
            ev("r", 3, "tool_result", "web", tool="web", tokens_in=400),
            ev("t", 4, "tool_call", "o", role="lead", tool="SendMessage", tokens_out=30),
            ev("m", 5, "message", "w", role="worker", to="o", tokens_out=60),
            ev("a", 6, "aggregate", "o", role="lead", tokens_in=30, tokens_out=10, cost_usd=0.02),
        ],
        [("d", "s", "spawn"), ("s", "c", "spawn"), ("c", "r", "tool_dependency"), ("r", "m", "causal")],
    )


def test_protocol_overhead_hand_computed():
    tr = _cost_trace()
    assert validate_trace(tr) == []
    # coordination: d 120 + t (coordination tool) 30 + m 60 + a 40 = 250 of 1000
    assert protocol_overhead(tr) == pytest.approx(0.25)
    r = analyze(tr)
    assert (r["tokens"], r["tokens_in"], r["tokens_out"]) == (1000, 830, 170)
    assert r["usd"] == pytest.approx(0.03)
    assert (r["tool_calls"], r["messages"]) == (2, 1)
    assert r["tokens_per_delegation"] == 1000.0 and r["messages_per_delegation"] == 1.0
    assert protocol_overhead(mk([ev("a", 0, "message", "o", to="o")])) is None


def test_totals_are_null_when_no_event_carries_tokens_or_usd():
    # the costs say 100 tokens; the events carry none: analyze said tokens 0, usd 0.0
    tr = mk(
        [ev("a", 0, "orchestrator_decision", "o", t_end=1), ev("b", 1, "message", "o", to="o", t_end=2)],
        [("a", "b", "causal")],
        costs={"tokens": 100, "wall_clock_s": 2},
    )
    r = analyze(tr)
    assert (r["tokens"], r["tokens_in"], r["tokens_out"], r["usd"]) == (None, None, None, None)
    assert r["tokens_per_delegation"] is None and r["wall_clock_s"] == 2.0
    # one event with tokens_out only: tokens are known (tokens_in counts as 0), USD still is not
    tr.events[1].tokens_out = 7
    r = analyze(tr)
    assert (r["tokens"], r["tokens_in"], r["tokens_out"], r["usd"]) == (7, 0, 7, None)


def test_breakdown_per_agent_role_type():
    tr = _cost_trace()
    by_agent = breakdown(tr, "agent")
    assert (
        by_agent["o"]["tokens"] == 190 and by_agent["o"]["events"] == 4 and by_agent["o"]["tool_calls"] == 1
    )
    assert by_agent["w"]["tokens"] == 410 and by_agent["w"]["messages"] == 1
    assert by_agent["web"]["tokens_in"] == 400
    by_role = breakdown(tr, "role")
    assert by_role["lead"]["usd"] == pytest.approx(0.02) and by_role["-"]["events"] == 1
    by_type = breakdown(tr, "type")
    assert set(by_type) == {
        "orchestrator_decision",
        "spawn",
        "tool_call",
        "tool_result",
        "message",
        "aggregate",
    }
    assert sum(r["events"] for r in by_type.values()) == 7


# ---------------------------------------------------------------- E3


def test_message_redundancy_exact_and_semantic():
    tr = mk(
        [
            ev("1", 0, "message", "a", to="b", content="The answer is 42."),
            ev("2", 1, "message", "b", to="a", content="the  answer is 42."),  # same after normalising
            ev("3", 2, "message", "a", to="b", content_ref="sha256:aa"),
            ev("4", 3, "message", "b", to="a", content_ref="sha256:aa"),
            ev("5", 4, "message", "a", to="b", content="I think it is forty-two"),
            ev("6", 5, "message", "b", to="a"),  # no content: not counted
        ]
    )
    assert message_redundancy(tr) == pytest.approx(2 / 5)
    assert message_redundancy(tr, similar=lambda a, b: 0.0) == pytest.approx(2 / 5)

    def overlap(x: str, y: str) -> float:  # Jaccard similarity of word sets
        a, b = set(x.lower().split()), set(y.lower().split())
        return len(a & b) / len(a | b)

    assert message_redundancy(tr, similar=overlap, threshold=0.1) == pytest.approx(3 / 5)  # {is}: 1/8
    assert message_redundancy(mk([ev("a", 0, "tool_call", "o", tool="x")])) is None
    assert messages_per_delegation(tr) is None


def test_debate_resolution():
    def deb(finals, resolved=None):
        es = [ev("j", 0, "orchestrator_decision", "judge")]
        edges = []
        for k, (first, final) in enumerate(finals):
            es.append(ev(f"s{k}", 0.5, "spawn", "judge", to=f"d{k}"))
            es.append(ev(f"f{k}", 1, "message", f"d{k}", to="judge", attrs={"answer": first}))
            es.append(ev(f"l{k}", 2, "message", f"d{k}", to="judge", attrs={"answer": final}))
            edges += [("j", f"s{k}", "spawn"), (f"s{k}", f"f{k}", "spawn"), (f"l{k}", "agg", "aggregate")]
        es.append(
            ev("agg", 3, "aggregate", "judge", attrs=None if resolved is None else {"resolved": resolved})
        )
        return mk(es, edges, topology="debate")

    d = debate(deb([("A", "A"), ("B", "A"), ("C", "B")]))
    assert d == {"debate_consensus": pytest.approx(2 / 3), "debate_resolved": 1.0, "debate_diversity": 1.0}
    d = debate(deb([("A", "A"), ("A", "B")]))
    assert d["debate_resolved"] == 0.0 and d["debate_consensus"] == 0.5 and d["debate_diversity"] == 0.5
    assert debate(deb([("A", "A"), ("A", "B")], resolved=True))["debate_resolved"] == 1.0
    tr = deb([("A", "A")])
    tr.topology = "centralized"
    assert debate(tr) == {"debate_consensus": None, "debate_resolved": None, "debate_diversity": None}


# ---------------------------------------------------------------- E1


def test_task_success_sources():
    tr = mk([ev("a", 0, "aggregate", "o")], rewards={"team": 0.3})
    assert task_success(tr) is None  # a team reward is not a success flag
    tr.rewards["success"] = 1.0
    assert task_success(tr) == 1.0
    tr.metrics = {"task_success": 0.0}
    assert task_success(tr) == 0.0
    assert task_success(tr, verifier=lambda t: t.events[-1].type == "aggregate") == 1.0


# ---------------------------------------------------------------- safety


def _safety_trace(sanitize: bool) -> object:
    # web result (untrusted) -> worker tool call -> return -> aggregate; a second path via a guard
    es = [
        ev("d", 0, "orchestrator_decision", "o", trusted=True),
        ev("s", 1, "spawn", "o", to="w"),
        ev("c", 2, "tool_call", "w", tool="web.fetch", call_id="1"),
        ev("r", 3, "tool_result", "web.fetch", tool="web.fetch", call_id="1", trusted=False),
        ev("g", 4, "safety_event", "guard"),
        ev("c2", 5, "tool_call", "w", tool="python", call_id="2"),
        ev("m", 5, "message", "w", to="o"),
        ev("d2", 6, "orchestrator_decision", "o"),
        ev("s2", 7, "spawn", "o", to="x"),
        ev("x1", 8, "message", "x", to="o"),
    ]
    edges = [
        ("d", "s", "spawn"),
        ("s", "c", "spawn"),
        ("c", "r", "return"),
        ("r", "g", "safety_flow"),
        ("g", "c2", "causal"),
        ("d2", "s2", "spawn"),
        ("s2", "x1", "spawn"),
    ]
    edges += [("g", "m", "causal")] if sanitize else [("r", "m", "causal")]
    edges += [("m", "d2", "message")]
    return mk(es, edges)


def test_taint_with_and_without_sanitizer():
    open_ = _safety_trace(sanitize=False)
    assert validate_trace(open_) == []
    flows = taint_flows(open_)
    # d2 is reached through a message, s2 then by o's own program order; x1 is not (spawn edges
    # carry no taint); c2 sits behind the guard
    assert [(f["decision"], f["path"], f["attack_vectors"]) for f in flows] == [
        ("d2", ["r", "m", "d2"], ["AV2", "AV3", "AV6"]),
        ("s2", ["r", "m", "d2", "s2"], ["AV2", "AV3", "AV6", "AV8"]),
    ]
    sm = safety_metrics(open_)
    assert sm["tainted_decisions"] == 2 and sm["untrusted_sources"] == 1 and sm["sanitized"] == 1
    assert sm["taint_reach"] == pytest.approx(5 / 10)  # r, g, m, d2, s2
    guarded = _safety_trace(sanitize=True)
    assert safety_metrics(guarded)["tainted_decisions"] == 0
    assert taint_flows(guarded) == []


def test_external_tools_and_uninstrumented_traces():
    es = [
        ev("c", 0, "tool_call", "o", tool="db", call_id="1"),
        ev("r", 1, "tool_result", "db", tool="db", call_id="1"),
        ev("a", 2, "aggregate", "o"),
    ]
    tr = mk(es, [("c", "r", "tool_dependency"), ("r", "a", "causal")])
    assert safety_metrics(tr)["tainted_decisions"] is None  # no trust information at all
    tr.metadata = {"external_tools": ["db"]}
    f = taint_flows(tr)
    assert [x["decision"] for x in f] == ["a"] and f[0]["attack_vectors"] == ["AV2", "AV6"]
    tr2 = mk(
        [
            *es[:1],
            ev("r", 1, "tool_result", "kv.memory", tool="kv.memory", call_id="1", attrs={"external": True}),
            es[2],
        ],
        [("c", "r", "tool_dependency"), ("r", "a", "causal")],
    )
    assert taint_flows(tr2)[0]["attack_vectors"] == ["AV2", "AV4", "AV6"]


def test_taint_spawn_and_tool_call_labels():
    tr = mk(
        [
            ev("h", 0, "message", "user", to="o", trusted=False),
            ev("c", 1, "tool_call", "o", tool="sh"),
            ev("s", 1, "spawn", "o", to="w"),
            ev("w", 2, "return", "w", to="o"),
            ev("a", 3, "aggregate", "o"),
        ],
        [("h", "c", "message"), ("h", "s", "message"), ("s", "w", "spawn"), ("w", "a", "return")],
    )
    labels = {f["decision"]: f["attack_vectors"] for f in taint_flows(tr)}
    # the final aggregate is reached through o's program order (s -> a)
    assert labels == {"c": ["AV3", "AV5"], "s": ["AV3", "AV6", "AV8"], "a": ["AV3", "AV6"]}


def test_taint_from_given_sources_is_monotone_on_an_example():
    v = TraceView(_safety_trace(sanitize=False))
    base = taint(v, np.zeros(v.n, dtype=bool))
    assert not base.reached.any()


def test_a_verifier_that_fails_is_named():
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.core.plugins import resolve

    tr = mk([ev("a", 0, "message", "o")])
    for ref, says in (
        ("os:getcwd", "verifier 'os:getcwd' failed"),
        ("builtins:str", "expected a finite number"),
    ):
        with pytest.raises(OrchestraceError, match=says):
            task_success(tr, resolve(ref, what="verifier", code="OT010"))
    assert task_success(tr, resolve("builtins:bool", what="verifier", code="OT010")) == 1.0


def test_success_channel_must_hold_a_success_flag():
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.measure.analyze import success_flag

    def tr(team):
        return mk([ev("a", 0, "message", "o")], rewards={} if team is None else {"team": team})

    assert [success_flag(tr(v), "team") for v in (1, 0.25, 0, None)] == [1.0, 0.25, 0.0, None]
    with pytest.raises(OrchestraceError, match="is -2.5, not a success flag"):  # was task_success -2.5
        success_flag(tr(-2.5), "team")
