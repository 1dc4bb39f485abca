"""Decisions answered by a policy that reads the trace so far (a learned policy, loaded outside).

The runtime does not know how a policy was made: anything with ``name``, ``decision``,
``check(program, config)`` and ``decide(trace) -> TraceDecision`` can answer that decision of a
program (``orchestrace.learn``'s ``load_policy`` returns such objects; the CLI loads them and hands
them to the runner). A program says which decisions it lets a policy answer (``Setup.learnable``)
and offers the choices through its policy:

- ``stop``: asked once per new worker answer (the program's own stop first);
- ``delegate``: ``delegate_options(s)`` (the agents the next task may go to; empty: nothing to
  route now) and ``delegate_to(s, agent)``;
- ``spawn``: ``spawn_options(s)`` (the most agents it may spawn now; None: no spawn decision now)
  and ``spawn_width(s, k)``;
- ``aggregate``: asked wherever the program aggregates; the policy's answer replaces the program's
  (no answer yet: the program's own).

Every answer is recorded as an ``orchestrator_decision`` event (decision ``should_<decision>``)
carrying the policy's name, the probability it gave the action it took, its feature hash and
``sampled: true`` when the action was drawn from that distribution (a greedy policy took the most
probable action), so a trace says which policy acted and a trainer can recompute its inputs and
weigh the recorded action by the chance it had.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..core.errors import BadInput
from ..core.model import Trace
from .orchestrator import AgentSpec, Message, Policy, Result, RunState, Task
from .recorder import Recorder

#: the decisions a trace policy can answer in a live run
LEARNABLE = ("stop", "delegate", "spawn", "aggregate")


@dataclass(frozen=True)
class TraceDecision:
    action: int  # stop: 1 = stop, 0 = continue; delegate: index of the option; spawn: agents to spawn
    prob: float  # the probability the policy gave the action it took
    features_hash: str
    samples: int = 0  # worker answers the decision saw (stop)
    sampled: bool = False  # drawn from the policy's distribution (prob is then the chance of this draw)
    answer: str | None = None  # aggregate: the answer the run returns (action: its index among the answers)

    @property
    def act(self) -> bool:
        return bool(self.action)


class TraceDecider(Protocol):
    name: str
    decision: str
    path: str  # the policy file, named in errors

    def check(self, program: str, config: dict[str, Any]) -> None:
        """Raise (naming the policy file) when the policy cannot run this program's config."""
        ...

    def decide(self, trace: Trace) -> TraceDecision | None:
        """None when there is nothing to decide on yet (no worker answer)."""
        ...


def check_trace_policies(
    deciders: dict[str, TraceDecider], program: str, learnable: tuple[str, ...], config: dict[str, Any]
) -> None:
    """Each policy answers the decision it is given for, the program has that decision, and the
    policy accepts the program's config; checked before anything is written."""
    for name, d in deciders.items():
        if name not in learnable:
            has = ", ".join(learnable) or "none"
            raise BadInput(
                "OT606",
                f"--policy {name}=...: the program {program!r} has no learned {name} decision "
                f"(its learnable decisions: {has})",
                path=d.path,
            )
        if d.decision != name:
            raise BadInput(
                "OT606", f"--policy {name}=...: the policy {d.name!r} answers {d.decision!r}, not {name!r}",
                path=d.path,
            )  # fmt: skip
        d.check(program, config)


class WithTracePolicies:
    """A program's policy with some decisions answered by trace policies (the rest unchanged)."""

    def __init__(self, base: Policy, deciders: dict[str, TraceDecider], rec: Recorder) -> None:
        self.base, self.deciders, self.rec = base, deciders, rec
        self.name = f"{base.name}+" + "+".join(f"{k}={d.name}" for k, d in deciders.items())
        self.on_error = base.on_error
        self._seen = 0

    def _ask(self, decision: str, s: RunState, value: Any, got: TraceDecision, **attrs: Any) -> None:
        d = self.deciders[decision]
        self.rec.decision(
            f"should_{decision}",
            value,
            attrs={"policy": d.name, "prob": round(float(got.prob), 6), "features_hash": got.features_hash,
                   **({"sampled": True} if got.sampled else {}), **attrs, "round": s.round},
        )  # fmt: skip

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if "spawn" not in self.deciders or (kmax := self.base.spawn_options(s)) is None:  # type: ignore[attr-defined]
            return self.base.spawn(s)
        got = self.deciders["spawn"].decide(self.rec.trace())
        if got is None:
            return self.base.spawn(s)
        k = min(got.action, kmax)
        self._ask("spawn", s, k, got)
        return self.base.spawn_width(s, k)  # type: ignore[attr-defined]

    def delegate(self, s: RunState) -> list[Task]:
        if "delegate" not in self.deciders or not (opts := self.base.delegate_options(s)):  # type: ignore[attr-defined]
            return self.base.delegate(s)
        got = self.deciders["delegate"].decide(self.rec.trace())
        if got is None:
            return self.base.delegate(s)
        self._ask("delegate", s, opts[got.action], got)
        return self.base.delegate_to(s, opts[got.action])  # type: ignore[attr-defined]

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        return self.base.communicate(s, results)

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        if "aggregate" not in self.deciders:
            return self.base.aggregate(s, results)
        got = self.deciders["aggregate"].decide(self.rec.trace())
        if got is None or got.answer is None:
            return self.base.aggregate(s, results)
        self._ask("aggregate", s, got.answer, got, samples=got.samples)
        return got.answer

    def stop(self, s: RunState) -> str | None:
        """The program's own stop (budget, failure) first; then, once per new worker answer, the policy."""
        if (reason := self.base.stop(s)) or "stop" not in self.deciders or len(s.results) == self._seen:
            return reason
        self._seen = len(s.results)
        got = self.deciders["stop"].decide(self.rec.trace())
        if got is None:
            return None
        self._ask("stop", s, "stop" if got.act else "continue", got, samples=got.samples)
        return f"policy:{self.deciders['stop'].name}" if got.act else None
