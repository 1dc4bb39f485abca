"""Synthetic orchestration traces: realistic shapes for benchmarks and property tests.

Every topology of the published schema has a generator. Each agent keeps its own clock; an event
starts when its agent is free and its dependencies have ended, so edges never go backwards in
time and parallel sub-agents really overlap. The same seed gives the same trace, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .core.build import TraceBuilder
from .core.model import SCHEMA_VERSION, TOPOLOGIES, Event, Trace, derived_costs

GEN_TOPOLOGIES = ("centralized", "hierarchical", "swarm", "debate", "planner_executor_critic", "harness")
_TOOLS = (
    ("web.search", False),
    ("web.fetch", False),
    ("python.exec", True),
    ("fs.read", True),
    ("db.query", True),
)
_MODELS = ("gpt-4o-mini", "claude-haiku", "qwen2.5-7b")


class _SyntheticRun(TraceBuilder):
    """One generated run: the trace builder plus the seeded draws and per-agent clocks that time
    its events (an agent's events chained by causal edges)."""

    def __init__(self, rng: np.random.Generator, error_rate: float) -> None:
        super().__init__()
        self.rng = rng
        self.error_rate = error_rate
        self.clock: dict[str, float] = {}
        self.end: dict[str, float] = {}
        self.turn: dict[str, int] = {}

    def ev(
        self,
        type: str,
        agent: str,
        *,
        after: tuple[tuple[str, str], ...] = (),
        dur: float | None = None,
        tokens: bool = True,
        **kw: object,
    ) -> str:
        rng = self.rng
        start = self.clock.get(agent, 0.0)
        for src, _ in after:
            start = max(start, self.end[src])
        eid = f"e{len(self.events) + 1}"
        t = round(start + float(rng.exponential(0.05)), 4)
        d = round(float(rng.gamma(2.0, 0.6)) if dur is None else dur, 4)
        extra: dict[str, object] = {}
        if tokens:
            tin, tout = int(rng.integers(80, 1200)), int(rng.integers(10, 400))
            extra.update(tokens_in=tin, tokens_out=tout, cost_usd=round((tin * 0.15 + tout * 0.6) / 1e6, 8))
            extra["model"] = _MODELS[int(rng.integers(len(_MODELS)))]
        extra["content_ref"] = f"sha256:{int(rng.integers(1 << 62)):016x}"
        extra.update(kw)
        turn = self.turn.get(agent, 0)
        event = Event(id=eid, t=t, t_end=round(t + d, 4), type=type, agent=agent, turn=turn, **extra)  # type: ignore[arg-type]
        self.add(event, *after, chain="causal")
        self.clock[agent] = t + d
        self.end[eid] = t + d
        return eid

    def spawn(self, parent: str, child: str, role: str, after: tuple[tuple[str, str], ...] = ()) -> str:
        sp = self.ev("spawn", parent, after=after, to=child, role=role, dur=0.05, tokens=False)
        self.clock[child] = max(self.clock.get(child, 0.0), self.end[sp])
        return sp

    def work(self, agent: str, role: str, steps: int, first_after: tuple[tuple[str, str], ...]) -> str:
        """A worker's loop: tool calls with results, the odd message; returns its last event id."""
        rng = self.rng
        after = first_after
        last = ""
        for k in range(max(1, steps)):
            self.turn[agent] = k
            tool, trusted = _TOOLS[int(rng.integers(len(_TOOLS)))]
            cid = f"c{len(self.events) + 1}"
            call = self.ev("tool_call", agent, after=after, tool=tool, role=role, call_id=cid)
            failed = bool(rng.random() < self.error_rate)
            last = self.ev(
                "tool_result",
                agent,
                after=((call, "tool_dependency"),),
                tool=tool,
                call_id=cid,
                role=role,
                tokens=False,
                trusted=trusted,
                status="error" if failed else "ok",
            )
            after = ()
        return last

    def ret(self, child: str, parent: str, role: str) -> str:
        return self.ev("return", child, to=parent, role=role, trusted=True)


def _centralized(b: _SyntheticRun, size: int, width: int) -> None:
    rng = b.rng
    orch = "orchestrator"
    rnd = 0
    pending: tuple[tuple[str, str], ...] = ()
    while len(b.events) < size:
        dec = b.ev("orchestrator_decision", orch, after=pending, role="lead")
        k = int(rng.integers(1, width + 1))
        rets = []
        for j in range(k):
            child = f"worker_{rnd}_{j}"
            sp = b.spawn(orch, child, "worker", after=((dec, "spawn"),) if j == 0 else ())
            steps = int(rng.integers(1, 6))
            b.work(child, "worker", steps, ((sp, "spawn"),))
            rets.append(b.ret(child, orch, "worker"))
        agg = b.ev("aggregate", orch, after=tuple((r, "aggregate") for r in rets), role="lead")
        pending = ((agg, "causal"),)
        rnd += 1
    b.ev("orchestrator_decision", orch, after=pending, role="lead", attrs={"decision": "stop"})


def _hierarchical(b: _SyntheticRun, size: int, width: int) -> None:
    rng = b.rng
    root = "orchestrator"
    rnd = 0
    pending: tuple[tuple[str, str], ...] = ()
    while len(b.events) < size:
        dec = b.ev("orchestrator_decision", root, after=pending, role="lead")
        mrets = []
        for m in range(int(rng.integers(1, max(2, width // 2) + 1))):
            mgr = f"manager_{rnd}_{m}"
            sp = b.spawn(root, mgr, "manager", after=((dec, "spawn"),) if m == 0 else ())
            mdec = b.ev("orchestrator_decision", mgr, after=((sp, "spawn"),), role="manager")
            wrets = []
            for w in range(int(rng.integers(1, width + 1))):
                wk = f"worker_{rnd}_{m}_{w}"
                wsp = b.spawn(mgr, wk, "worker", after=((mdec, "spawn"),) if w == 0 else ())
                b.work(wk, "worker", int(rng.integers(1, 5)), ((wsp, "spawn"),))
                wrets.append(b.ret(wk, mgr, "worker"))
            b.ev("aggregate", mgr, after=tuple((r, "aggregate") for r in wrets), role="manager")
            mrets.append(b.ret(mgr, root, "manager"))
        agg = b.ev("aggregate", root, after=tuple((r, "aggregate") for r in mrets), role="lead")
        pending = ((agg, "causal"),)
        rnd += 1
    b.ev("orchestrator_decision", root, after=pending, role="lead", attrs={"decision": "stop"})


def _swarm(b: _SyntheticRun, size: int, width: int) -> None:
    rng = b.rng
    root = "orchestrator"
    dec = b.ev("orchestrator_decision", root, role="lead")
    peers = [f"peer_{j}" for j in range(max(2, width))]
    for j, p in enumerate(peers):
        sp = b.spawn(root, p, "peer", after=((dec, "spawn"),) if j == 0 else ())
        b.ev("orchestrator_decision", p, after=((sp, "spawn"),), role="peer")
    while len(b.events) < size - 2 * len(peers):
        a = peers[int(rng.integers(len(peers)))]
        if rng.random() < 0.5:
            c = peers[int(rng.integers(len(peers)))]
            if c == a:
                continue
            msg = b.ev("message", a, to=c, role="peer", trusted=True, **{"from_": a})
            b.ev("orchestrator_decision", c, after=((msg, "message"),), role="peer")
        else:
            b.work(a, "peer", 1, ())
    rets = [b.ret(p, root, "peer") for p in peers]
    b.ev("aggregate", root, after=tuple((r, "aggregate") for r in rets), role="lead")


def _debate(b: _SyntheticRun, size: int, width: int) -> None:
    judge = "judge"
    dec = b.ev("orchestrator_decision", judge, role="judge")
    debaters = [f"debater_{j}" for j in range(max(2, min(width, 4)))]
    for j, d in enumerate(debaters):
        b.spawn(judge, d, "debater", after=((dec, "spawn"),) if j == 0 else ())
    last: dict[str, str] = {}
    rnd = 0
    while len(b.events) < size - 2 * len(debaters):
        for d in debaters:
            b.turn[d] = rnd
            deps = tuple((last[o], "message") for o in debaters if o != d and o in last)
            last[d] = b.ev("message", d, after=deps, to=judge, role="debater", trusted=True, **{"from_": d})
        rnd += 1
    rets = [b.ret(d, judge, "debater") for d in debaters]
    b.ev(
        "aggregate",
        judge,
        after=tuple((r, "aggregate") for r in rets),
        role="judge",
        attrs={"resolved": True},
    )


def _pec(b: _SyntheticRun, size: int, width: int) -> None:
    orch = "orchestrator"
    dec = b.ev("orchestrator_decision", orch, role="lead")
    for name in ("planner", "executor", "critic"):
        b.spawn(orch, name, name, after=((dec, "spawn"),))
    feedback: tuple[tuple[str, str], ...] = ()
    while len(b.events) < size - 4:
        plan = b.ev(
            "message", "planner", after=feedback, to="executor", role="planner", **{"from_": "planner"}
        )
        out = b.work("executor", "executor", int(b.rng.integers(1, 4)), ((plan, "message"),))
        rep = b.ev(
            "message",
            "executor",
            after=((out, "causal"),),
            to="critic",
            role="executor",
            **{"from_": "executor"},
        )
        crit = b.ev(
            "message", "critic", after=((rep, "message"),), to="planner", role="critic", **{"from_": "critic"}
        )
        feedback = ((crit, "message"),)
    r = b.ret("critic", orch, "critic")
    b.ev("aggregate", orch, after=((r, "aggregate"),), role="lead")


def _harness(b: _SyntheticRun, size: int, width: int) -> None:
    agent = "agent"
    while len(b.events) < size - 1:
        dec = b.ev("orchestrator_decision", agent, role="agent")
        b.work(agent, "agent", 1, ((dec, "causal"),))
    b.ev("aggregate", agent, role="agent")


_GENERATORS: dict[str, Callable[[_SyntheticRun, int, int], None]] = {
    "centralized": _centralized,
    "hierarchical": _hierarchical,
    "swarm": _swarm,
    "debate": _debate,
    "planner_executor_critic": _pec,
    "harness": _harness,
}


def generate(
    *,
    seed: int = 0,
    size: int = 100,
    topology: str = "centralized",
    width: int = 4,
    error_rate: float = 0.05,
    trace_id: str | None = None,
) -> Trace:
    """One synthetic trace of about ``size`` events (it ends a round cleanly, so a few more)."""
    from .core.errors import OrchestraceError

    if topology not in _GENERATORS:
        raise OrchestraceError(
            "OT021", f"unknown topology {topology!r}; choose from {', '.join(GEN_TOPOLOGIES)}"
        )
    if seed < 0:  # numpy's "expected non-negative integer" was an internal error (exit 3)
        raise OrchestraceError("OT010", f"the seed must be >= 0, got {seed}")
    assert topology in TOPOLOGIES
    rng = np.random.default_rng(seed)
    b = _SyntheticRun(rng, error_rate)
    _GENERATORS[topology](b, max(4, size), max(1, width))
    errors = sum(1 for e in b.events if e.status == "error")
    success = float(rng.random() < 0.9 * (0.8**errors))
    tid = trace_id or f"gen-{topology}-{size}-{seed}"
    return b.trace(
        schema_version=SCHEMA_VERSION,
        trace_id=tid,
        task_id=f"task-{seed % 97}",
        system="orchestrace-gen",
        topology=topology,
        rewards={"team": success},
        metrics={"task_success": success},
        costs=derived_costs(b.events),
    )


def generate_corpus(
    n: int, *, seed: int = 0, size: int = 100, topology: str | None = None, **kw: object
) -> list[Trace]:
    """``n`` traces; topologies cycle through all generators unless one is given."""
    return [
        generate(seed=seed + i, size=size, topology=topology or GEN_TOPOLOGIES[i % len(GEN_TOPOLOGIES)], **kw)  # type: ignore[arg-type]
        for i in range(n)
    ]
