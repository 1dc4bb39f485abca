"""One loader for every learned decision policy; stop, delegate, spawn and aggregate policies as runtime
trace policies.

Every policy file is a safetensors file (weights, numpy inference) with its JSON config beside it
and in the header metadata; the header's ``orchestrace.decision`` key names the decision it
answers (files written before the key existed are recognised by their config key).
:func:`load_policy` reads any of them; the stop, delegate and spawn policies it returns answer
``decide(trace)`` from the trace so far (any program recording with ``Recorder`` can ask them),
each through the same feature function as its training and offline evaluation
(``stopping.features.prefix_features``, ``envs.delegate_traces.delegate_features``,
``envs.swarm_traces.spawn_features``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import BadInput, OrchestraceError
from ..core.model import Trace
from ..runtime.learned import LEARNABLE, TraceDecision
from .rl.rollouts import ENV_DECISION, NumpyPolicy
from .stopping.adapters import LearnedAggregate, LearnedStop
from .stopping.features import features_hash
from .stopping.policy import StopPolicy


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
        except (json.JSONDecodeError, AttributeError, RecursionError):
            env = None
        if env in ENV_DECISION:
            return ENV_DECISION[env]
    raise BadInput("OT622", "not an orchestrace policy file (no decision in its header)", path=st)


def _choose(policy: NumpyPolicy, x: np.ndarray, explore_key: str | None) -> TraceDecision:
    """The most probable action (as ``NumpyPolicy.act`` without a generator), or with ``explore_key``
    one drawn from the policy's distribution (seeded by the key: the run and the step); its
    probability and the features' hash."""
    p = policy.probs(x[None])[0]
    if explore_key is None:
        a = int(p.argmax())
    else:
        h = hashlib.sha256(f"{policy.meta.seed}|{explore_key}".encode()).digest()
        u = int.from_bytes(h[:8], "little") / 2**64
        a = min(int(np.searchsorted(np.cumsum(p, dtype=np.float64), u, side="right")), len(p) - 1)
    return TraceDecision(a, float(p[a]), features_hash(x), sampled=explore_key is not None)


@dataclass
class GymDecisionPolicy:
    """A RetryStop policy (observation -> action): no program of the runtime has that decision."""

    name: str
    decision: str
    path: str
    policy: NumpyPolicy

    def check(self, program: str, config: dict[str, Any]) -> None:
        raise BadInput("OT623", f"the {self.decision} policy cannot act in a live run (no program reads it)",
                       path=self.path)  # fmt: skip

    def decide(self, trace: Trace) -> TraceDecision | None:
        raise BadInput("OT623", f"the {self.decision} policy cannot act in a live run", path=self.path)


@dataclass
class LearnedDelegate:
    """A Delegate routing policy asked on a route trace: which of the offered models gets the query."""

    name: str
    path: str
    policy: NumpyPolicy
    decision: str = "delegate"
    explore: bool = (
        False  # draw the model from the policy's distribution (seeded by the run) instead of the best
    )

    def __post_init__(self) -> None:
        from .envs.delegate import HASH_DIM, N_STATS

        if self.policy.meta.extra.get("mode", "route") != "route":
            raise BadInput("OT623", "a cascade policy decides after each answer; only a route policy (one model "
                           "per query) runs in the route program", path=self.path)  # fmt: skip
        if self.policy.meta.obs_dim != HASH_DIM + N_STATS:
            raise BadInput("OT623", f"the policy sees {self.policy.meta.obs_dim} features, the delegate feature "
                           f"function gives {HASH_DIM + N_STATS}", path=self.path)  # fmt: skip
        self.models = list(self.policy.meta.extra.get("models") or [])

    def check(self, program: str, config: dict[str, Any]) -> None:
        from .envs.delegate_traces import DEFAULT_MODELS

        offered = config.get("models", DEFAULT_MODELS)
        if offered != self.models:
            raise BadInput("OT623", f"the policy routes among {self.models}, the run offers {offered} "
                           "(set the config's models to the policy's)", path=self.path)  # fmt: skip

    def decide(self, trace: Trace) -> TraceDecision | None:
        from .envs.delegate_traces import delegate_features

        return _choose(self.policy, delegate_features(trace), trace.trace_id if self.explore else None)


@dataclass
class LearnedSpawn:
    """A Swarm spawn-width policy asked on a swarm trace: how many agents for the next stage."""

    name: str
    path: str
    policy: NumpyPolicy
    decision: str = "spawn"
    explore: bool = False  # draw the width from the policy's distribution (seeded by the run and the stage)

    def __post_init__(self) -> None:
        from .envs.swarm import N_FEATURES, SwarmConfig

        if self.policy.meta.obs_dim != N_FEATURES:
            raise BadInput("OT623", f"the policy sees {self.policy.meta.obs_dim} features, the spawn feature "
                           f"function gives {N_FEATURES}: retrain with train swarm", path=self.path)  # fmt: skip
        self.cfg = SwarmConfig(**self.policy.meta.extra.get("config", {}))

    def check(self, program: str, config: dict[str, Any]) -> None:
        k = config.get("max_agents", 8)
        if k != self.cfg.max_agents:
            raise BadInput("OT623", f"the policy spawns 0..{self.cfg.max_agents} agents, the run allows "
                           f"0..{k} (set the config's max_agents)", path=self.path)  # fmt: skip

    def decide(self, trace: Trace) -> TraceDecision | None:
        from .envs.swarm_traces import spawn_features, stage_widths

        x = spawn_features(trace, self.cfg)
        key = f"{trace.trace_id}|{len(stage_widths(trace))}" if self.explore else None
        return None if x is None else _choose(self.policy, x, key)


TracePolicy = LearnedStop | LearnedDelegate | LearnedSpawn | LearnedAggregate | GymDecisionPolicy


def load_policy(path: str, *, explore: bool = False) -> TracePolicy:
    """Any saved decision policy; stop, delegate and spawn policies satisfy the runtime's trace-policy
    protocol (``explore``: they draw their actions from their distribution, seeded by the run)."""
    decision = policy_decision(path)
    base = path.removesuffix(".safetensors").removesuffix(".json")
    name = os.path.basename(base)
    if decision == "stop":
        return LearnedStop(StopPolicy.load(path), name, base + ".safetensors", explore=explore)
    st = base + ".safetensors"
    if decision == "delegate":
        return LearnedDelegate(name, st, NumpyPolicy.load(path, env="Delegate"), explore=explore)
    if decision == "spawn":
        return LearnedSpawn(name, st, NumpyPolicy.load(path, env="Swarm"), explore=explore)
    if decision == "aggregate":
        return LearnedAggregate(st, name)
    if decision == "retry_stop":
        return GymDecisionPolicy(name, decision, st, NumpyPolicy.load(path))
    raise BadInput("OT622", f"unknown decision {decision!r} in the policy header", path=base + ".safetensors")


def load_trace_policies(specs: list[str], *, explore: bool = False) -> dict[str, TracePolicy]:
    """``--policy DECISION=PATH`` options -> the policies a run uses (each checked against its decision)."""
    out: dict[str, TracePolicy] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise OrchestraceError("OT606", f"--policy expects DECISION=PATH, got {spec!r}")
        if name in out:
            raise OrchestraceError("OT606", f"--policy {name}=... given twice")
        if name not in LEARNABLE:
            raise BadInput(
                "OT606",
                f"--policy {name}=...: a program's learned decisions are {', '.join(LEARNABLE)}",
                path=path,
            )
        pol = load_policy(path, explore=explore)
        if pol.decision != name:
            raise BadInput(
                "OT606",
                f"--policy {name}=...: this policy file answers {pol.decision!r}, not {name!r}",
                path=pol.path,
            )
        out[name] = pol
    return out
