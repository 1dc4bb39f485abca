"""Tiny hand-built traces shared by the measure, reward and credit tests.

``tests/conftest.py`` puts every folder under tests/ on ``sys.path``, so tests import this module
as ``tracekit`` from any folder.
"""

from __future__ import annotations

from typing import Any

from orchestrace.core.model import Edge, Event, Trace


def ev(id: str, t: float, type: str, agent: str, **kw: Any) -> Event:
    return Event(id=id, t=t, type=type, agent=agent, **kw)


def mk(
    events: list[Event],
    edges: list[tuple[str, str, str]] = (),
    *,
    trace_id: str = "tr",
    task_id: str = "task",
    rewards: dict[str, float] | None = None,
    **kw: Any,
) -> Trace:
    """A trace with zero recorded costs; ``edges`` as (src, dst, type) triples."""
    kw.setdefault("costs", {"tokens": 0, "wall_clock_s": 0})
    return Trace(
        trace_id=trace_id,
        task_id=task_id,
        events=events,
        edges=[Edge(s, d, ty) for s, d, ty in edges],
        rewards=dict(rewards or {}),
        **kw,
    )


def swarm(sub_steps: list[int], *, ok: list[bool] | None = None, team: float = 1.0) -> Trace:
    """Kimi-style stages: 1 main action; 1 main spawn action + parallel sub-agents; 1 aggregate."""
    ok = ok or [True] * len(sub_steps)
    es = [ev("d1", 0, "orchestrator_decision", "main"), ev("d2", 1, "orchestrator_decision", "main")]
    edges = [("d1", "d2", "causal")]
    t_end = 2 + max(sub_steps)
    for i, (k, good) in enumerate(zip(sub_steps, ok, strict=True)):
        a = f"sub{i}"
        es.append(ev(f"s{i}", 1.5, "spawn", "main", to=a))
        edges.append(("d2", f"s{i}", "spawn"))
        prev = f"s{i}"
        for j in range(k):
            last = j == k - 1
            eid = f"w{i}_{j}"
            typ = "return" if last else "message"
            kw = {"to": "main"} if last else {}
            es.append(ev(eid, 2 + j, typ, a, status="ok" if (good or not last) else "error", **kw))
            edges.append((prev, eid, "spawn" if j == 0 else "causal"))
            prev = eid
        edges.append((prev, "agg", "return"))
    es.append(ev("agg", t_end, "aggregate", "main"))
    return mk(es, edges, rewards={"team": team})


def centralized(team: float = 0.0, c_fails: bool = True) -> Trace:
    """main spawns a, b, c; a and b message, c calls a tool (which errors); all return; main aggregates."""
    es = [ev("d1", 0, "orchestrator_decision", "main", role="orchestrator", content="plan")]
    edges = []
    for k, a in enumerate("abc"):
        es.append(ev(f"s_{a}", 1 + 0.1 * k, "spawn", "main", to=a, role="orchestrator"))
        edges.append(("d1", f"s_{a}", "spawn"))
    es += [
        ev("m_a", 2, "message", "a", role="worker", to="main", content="fact A", tokens_out=4),
        ev("m_b", 2, "message", "b", role="worker", to="main", content="fact B", tokens_out=6),
        ev(
            "tc_c",
            2,
            "tool_call",
            "c",
            role="searcher",
            tool="search",
            call_id="1",
            content="q",
            tokens_out=2,
        ),
        ev(
            "tr_c",
            3,
            "tool_result",
            "search",
            tool="search",
            call_id="1",
            status="error" if c_fails else "ok",
        ),
    ]
    edges += [
        ("s_a", "m_a", "spawn"),
        ("s_b", "m_b", "spawn"),
        ("s_c", "tc_c", "spawn"),
        ("tc_c", "tr_c", "tool_dependency"),
    ]
    for a, prev in (("a", "m_a"), ("b", "m_b"), ("c", "tr_c")):
        role = "searcher" if a == "c" else "worker"
        es.append(ev(f"r_{a}", 4, "return", a, role=role, to="main", content=f"done {a}", tokens_out=3))
        edges += [(prev, f"r_{a}", "causal"), (f"r_{a}", "agg", "return")]
    es.append(ev("agg", 5, "aggregate", "main", role="orchestrator", content="answer", tokens_out=5))
    edges.append(("d1", "agg", "causal"))
    return mk(es, edges, rewards={"team": team})


def flat_team(team: float = 0.0, bad: str = "c") -> Trace:
    """A fixed team a, b, c (no spawns): each posts one message; ``bad`` posts an erroneous one; a judge aggregates."""
    es = [ev(f"m_{a}", 0, "message", a, content=a, status="error" if a == bad else "ok") for a in "abc"]
    es.append(ev("agg", 1, "aggregate", "judge", content="verdict"))
    return mk(es, [(f"m_{a}", "agg", "message") for a in "abc"], rewards={"team": team})
