"""Decisions answered by a policy that reads the trace so far (a learned policy, loaded outside).

The runtime does not know how a policy was made: anything with ``name``, ``decision`` and
``decide(trace) -> TraceDecision`` can answer that decision of a program (``orchestrace.learn``'s
``load_policy`` returns such objects; the CLI loads them and hands them to the runner). Every answer
is recorded as an ``orchestrator_decision`` event (decision ``should_<decision>``) carrying the
policy's name, the probability it gave the action it took, its feature hash and the number of
worker answers it saw, so a trace says which policy acted and a trainer can recompute its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..core.errors import OrchestraceError
from ..core.model import Trace
from .orchestrator import AgentSpec, Message, Policy, Result, RunState, Task
from .recorder import Recorder

#: the decisions a trace policy can answer today
LEARNABLE = ("stop",)


@dataclass(frozen=True)
class TraceDecision:
    act: bool  # stop now (for ``stop``)
    prob: float  # the probability the policy gave the action it took
    features_hash: str
    samples: int  # worker answers the decision saw


class TraceDecider(Protocol):
    name: str
    decision: str

    def decide(self, trace: Trace) -> TraceDecision | None:
        """None when there is nothing to decide on yet (no worker answer)."""
        ...


def check_trace_policies(deciders: dict[str, TraceDecider]) -> None:
    """Each policy answers the decision it is given for, and that decision can be learned."""
    for name, d in deciders.items():
        if name not in LEARNABLE:
            raise OrchestraceError(
                "OT606", f"--policy {name}=...: a learned policy can answer {', '.join(LEARNABLE)} only"
            )
        if d.decision != name:
            raise OrchestraceError(
                "OT606", f"--policy {name}=...: the policy {d.name!r} answers {d.decision!r}, not {name!r}"
            )


class WithTracePolicies:
    """A program's policy with some decisions answered by trace policies (the rest unchanged)."""

    def __init__(self, base: Policy, deciders: dict[str, TraceDecider], rec: Recorder) -> None:
        check_trace_policies(deciders)
        self.base, self.deciders, self.rec = base, deciders, rec
        self.name = f"{base.name}+" + "+".join(f"{k}={d.name}" for k, d in deciders.items())
        self.on_error = base.on_error
        self._seen = 0

    def spawn(self, s: RunState) -> list[AgentSpec]:
        return self.base.spawn(s)

    def delegate(self, s: RunState) -> list[Task]:
        return self.base.delegate(s)

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        return self.base.communicate(s, results)

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        return self.base.aggregate(s, results)

    def stop(self, s: RunState) -> str | None:
        """The program's own stop (budget, failure) first; then, once per new worker answer, the policy."""
        if (reason := self.base.stop(s)) or "stop" not in self.deciders or len(s.results) == self._seen:
            return reason
        self._seen = len(s.results)
        d = self.deciders["stop"]
        got = d.decide(self.rec.trace())
        if got is None:
            return None
        self.rec.decision(
            "should_stop",
            "stop" if got.act else "continue",
            attrs={
                "policy": d.name,
                "prob": round(float(got.prob), 6),
                "features_hash": got.features_hash,
                "samples": got.samples,
                "round": s.round,
            },
        )
        return f"policy:{d.name}" if got.act else None
