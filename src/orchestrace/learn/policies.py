"""One loader for every learned decision policy, and the stop policy as a runtime trace policy.

Every policy file is a safetensors file (weights, numpy inference) with its JSON config beside it
and in the header metadata; the header's ``orchestrace.decision`` key names the decision it
answers (files written before the key existed are recognised by their config key).
:func:`load_policy` reads any of them; the stop policy it returns answers ``decide(trace)`` from
the trace so far (any program recording with ``Recorder`` can ask it), through the same
feature function as training and offline evaluation (``stopping.features.prefix_features``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from ..core.errors import BadInput, OrchestraceError
from ..core.model import Trace
from ..runtime.learned import LEARNABLE, TraceDecision
from .rl.rollouts import ENV_DECISION, NumpyPolicy
from .stopping.features import features_hash, prefix_features
from .stopping.policy import StopPolicy
from .stopping.traces import episode_from_trace


def _header(path: str) -> tuple[str, dict[str, str]]:
    from safetensors import safe_open

    base = path.removesuffix(".safetensors").removesuffix(".json")
    st = base + ".safetensors"
    if not os.path.isfile(st):
        raise OrchestraceError("OT620", "policy weights not found (expected a .safetensors file)", path=st)
    try:
        with safe_open(st, framework="numpy") as f:
            return st, dict(f.metadata() or {})
    except Exception as e:  # safetensors raises its own error types for a corrupt header
        raise BadInput("OT621", f"not a safetensors file: {e}", path=st) from None


def policy_decision(path: str) -> str:
    """The decision a policy file answers (``stop``, ``retry_stop``, ``delegate``, ``spawn``)."""
    st, meta = _header(path)
    if "orchestrace.decision" in meta:
        return meta["orchestrace.decision"]
    if "orchestrace.policy" in meta:
        return "stop"
    if "config" in meta:
        import json

        try:
            env = json.loads(meta["config"]).get("env")
        except (json.JSONDecodeError, AttributeError):
            env = None
        if env in ENV_DECISION:
            return ENV_DECISION[env]
    raise BadInput("OT622", "not an orchestrace policy file (no decision in its header)", path=st)


@dataclass
class GymDecisionPolicy:
    """A RetryStop / Delegate / Swarm policy (observation -> action); not yet runnable in the runtime."""

    name: str
    decision: str
    path: str
    policy: NumpyPolicy

    def decide(self, trace: Trace) -> TraceDecision | None:
        raise OrchestraceError(
            "OT623",
            f"the {self.decision} policy cannot act in a live run yet (only stop policies read a trace)",
            path=self.path,
        )


class LearnedStop:
    """A learned stop policy (StopVote) asked on a vote trace's prefix."""

    decision = "stop"

    def __init__(self, policy: StopPolicy, name: str, path: str, *, explore: bool = False) -> None:
        if policy.aggregator is not None:
            raise OrchestraceError(
                "OT623",
                "this stop policy also uses a learned aggregator, whose features need per-family answer "
                "statistics a live run does not have; use the majority-vote policy (without -agg)",
                path=path,
            )
        self.policy, self.name, self.path = policy, name, path
        self.explore = explore  # sample the action (seeded by the run and the step) instead of thresholding

    def for_run(self, trace_id: str) -> StopPolicy:
        """A mixture draws which of its two policies runs once per run (seeded by the trace id)."""
        if self.policy.alt is None or self.policy.config.mixture is None:
            return self.policy
        h = hashlib.sha256(f"{self.policy.config.seed}|{trace_id}".encode()).digest()
        u = int.from_bytes(h[:8], "little") / 2**64
        return self.policy.alt if u < self.policy.config.mixture["prob"] else self.policy

    def decide(self, trace: Trace) -> TraceDecision | None:
        ep = episode_from_trace(trace)
        if not ep.answers:
            return None
        pol = self.for_run(trace.trace_id)
        x = prefix_features(ep.answers, pol.config.budget, ep.costs)
        p = float(pol.stop_prob(x[None])[0])
        if self.explore:
            h = hashlib.sha256(f"{pol.config.seed}|{trace.trace_id}|{len(ep.answers)}".encode()).digest()
            act = int.from_bytes(h[:8], "little") / 2**64 < p
        else:
            act = p >= pol.config.threshold
        return TraceDecision(act, p if act else 1.0 - p, features_hash(x), len(ep.answers))


def load_policy(path: str) -> LearnedStop | GymDecisionPolicy:
    """Any saved decision policy; the stop policy satisfies the runtime's trace-policy protocol."""
    decision = policy_decision(path)
    base = path.removesuffix(".safetensors").removesuffix(".json")
    name = os.path.basename(base)
    if decision == "stop":
        return LearnedStop(StopPolicy.load(path), name, base + ".safetensors")
    if decision in ("retry_stop", "delegate", "spawn"):
        return GymDecisionPolicy(name, decision, base + ".safetensors", NumpyPolicy.load(path))
    raise BadInput("OT622", f"unknown decision {decision!r} in the policy header", path=base + ".safetensors")


def load_trace_policies(specs: list[str]) -> dict[str, LearnedStop | GymDecisionPolicy]:
    """``--policy DECISION=PATH`` options -> the policies a run uses (each checked against its decision)."""
    out: dict[str, LearnedStop | GymDecisionPolicy] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise OrchestraceError("OT606", f"--policy expects DECISION=PATH, got {spec!r}")
        if name in out:
            raise OrchestraceError("OT606", f"--policy {name}=... given twice")
        if name not in LEARNABLE:
            raise OrchestraceError(
                "OT606",
                f"--policy {name}=...: a program's learned decisions are {', '.join(LEARNABLE)}",
                path=path,
            )
        pol = load_policy(path)
        if pol.decision != name:
            raise OrchestraceError(
                "OT606",
                f"--policy {name}=...: this policy file answers {pol.decision!r}, not {name!r}",
                path=pol.path,
            )
        out[name] = pol
    return out
