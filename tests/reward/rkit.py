"""Tiny trace builders for reward tests."""

from __future__ import annotations

from orchestrace.core.model import Edge, Event, Trace


def ev(id: str, t: float, type: str, agent: str, **kw) -> Event:
    return Event(id=id, t=t, type=type, agent=agent, **kw)


def mk(
    events: list[Event],
    edges: list[tuple[str, str, str]] = (),
    rewards=None,
    task: str = "task",
    tid: str = "tr",
):
    return Trace(
        trace_id=tid,
        task_id=task,
        events=events,
        edges=[Edge(s, d, ty) for s, d, ty in edges],
        rewards=dict(rewards or {}),
        costs={"tokens": 0, "wall_clock_s": 0},
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
