"""Hand-built traces for the measure tests: tiny builders and Kimi-style stage traces."""

from __future__ import annotations

from typing import Any

import pytest
from tracekit import ev, mk

from orchestrace.core.model import Event, Trace
from orchestrace.measure import TraceView, breakdown
from orchestrace.measure.view import time_critical_path


class _StageBuilder:
    """Builds a trace from Kimi stages with unit-length steps, scheduled as early as possible.

    A stage is ``(main_steps, subs)``; a sub-agent is an int (its step count) or its own stages.
    Each main step is a tool call (+ instantaneous result); the last main step of a stage with
    sub-agents is a decision followed by one instantaneous spawn per sub-agent; the first step after
    sub-agents consumes their returns; an agent's very last step is an aggregate (top level) or its
    return (sub-agent). With unit steps, wall-clock critical path == Critical Steps and serial work
    == total steps.
    """

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.edges: list[tuple[str, str, str]] = []
        self.n = 0

    def add(self, t: float, dur: float, type: str, agent: str, deps: list[tuple[str, str]], **kw: Any) -> str:
        self.n += 1
        eid = f"x{self.n}"
        self.events.append(ev(eid, t, type, agent, t_end=t + dur, **kw))
        self.edges.extend((s, eid, ty) for s, ty in deps)
        return eid

    def agent(
        self, name: str, stages: list, t0: float, first_deps: list[tuple[str, str]], parent: str | None
    ) -> tuple[str, float]:
        """Run one agent; returns (id of its last event, its end time)."""
        assert stages and not stages[-1][1], "an agent's last stage has no sub-agents"
        t = t0
        deps = first_deps
        last = ""
        pending: list[tuple[str, float]] = []  # returns of the previous stage's sub-agents
        n_total = sum(m for m, _ in stages)
        done = 0
        for m, subs in stages:
            assert m >= 1
            for j in range(m):
                done += 1
                if pending:
                    t = max([t] + [e for _, e in pending])
                    deps = deps + [(r, "return") for r, _ in pending]
                    pending = []
                if done == n_total:
                    if parent is None:
                        last = self.add(t, 1, "aggregate", name, deps)
                    else:
                        last = self.add(t, 1, "return", name, deps, to=parent, **{"from_": name})
                    t += 1
                elif j == m - 1 and subs:
                    dec = self.add(t, 1, "orchestrator_decision", name, deps)
                    t += 1
                    for k, sub in enumerate(subs):
                        child = f"{name}.{k}"
                        sp = self.add(t, 0, "spawn", name, [(dec, "spawn")], to=child)
                        sub_stages = [(1, [])] * sub if isinstance(sub, int) else sub
                        pending.append(self.agent(child, sub_stages, t, [(sp, "spawn")], name))
                    last = dec
                else:
                    cid = f"c{self.n + 1}"
                    call = self.add(t, 1, "tool_call", name, deps, tool="calc", call_id=cid)
                    t += 1
                    last = self.add(
                        t, 0, "tool_result", name, [(call, "tool_dependency")], tool="calc", call_id=cid
                    )
                deps = [(last, "causal")]
        return last, t


def stages_trace(stages: list, trace_id: str = "kimi") -> Trace:
    b = _StageBuilder()
    b.agent("main", stages, 0.0, [], None)
    return mk(b.events, b.edges, trace_id=trace_id)


KIMI = [(1, []), (1, [6, 9, 4, 7]), (1, [])]
KIMI_BALANCED = [(1, []), (1, [7, 7, 6, 6]), (1, [])]


def assert_unclamped_invariants(tr: Trace, r: dict[str, Any]) -> None:
    """The replay's critical path is at most the serial work and the speed-up at least 1, exactly
    (no clamp, no tolerance); the reported values are the replay's and their ratio; the busy time
    per agent (``analyze --by agent``) adds up to the serial work."""
    raw, _, _ = time_critical_path(TraceView(tr))
    serial = r["serial_work_s"]
    assert raw <= serial, (raw, serial)
    assert r["critical_path_s"] == raw
    if raw > 0:
        assert r["parallel_speedup"] == serial / raw
        assert r["parallel_speedup"] >= 1.0
    else:  # no time recorded: only the trace's own recorded value, if any, is reported
        assert r["parallel_speedup"] == (tr.metrics or {}).get("parallelism_efficiency")
    busy = sum(row["busy_s"] for row in breakdown(tr, "agent").values())
    assert busy == pytest.approx(serial, rel=1e-9, abs=1e-9)
