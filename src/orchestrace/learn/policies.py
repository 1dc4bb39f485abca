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
from .stopping.aggregate import AnswerPrior, priors_from_json
from .stopping.features import answer_ids, features_hash, prefix_features
from .stopping.policy import StopPolicy
from .stopping.traces import VoteEpisode, episode_from_trace


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


class LearnedStop:
    """A learned stop policy (StopVote) asked on a vote trace's prefix. A policy with a learned
    aggregator ("-agg") also sees the aggregator's posterior, whose answer statics need the family's
    answer prior: saved in the policy file by ``train stop`` (``extra["answer_priors"]``, from the
    training families and the calibration split, never the reported questions), as
    :class:`LearnedAggregate` saves its own; a run of a family without a saved prior is refused."""

    decision = "stop"

    def __init__(self, policy: StopPolicy, name: str, path: str, *, explore: bool = False) -> None:
        self.priors: dict[str, AnswerPrior] = {}
        if policy.aggregator is not None:
            saved = policy.config.extra.get("answer_priors")
            if not saved:
                raise BadInput("OT623", "this stop policy uses a learned aggregator but saves no answer priors "
                               "(written before -agg policies could run live): retrain it with train stop",
                               path=path)  # fmt: skip
            try:
                self.priors = priors_from_json(saved)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise BadInput("OT622", f"bad answer_priors in the policy config: {e}",
                               path=path.removesuffix(".safetensors") + ".json") from None  # fmt: skip
        self.policy, self.name, self.path = policy, name, path
        self.explore = explore  # sample the action (seeded by the run and the step) instead of thresholding

    @property
    def needs_logprobs(self) -> bool:
        """A ``counts+confidence`` policy reads each answer's token log-probabilities (the runner
        refuses a backend that records none before the run)."""
        return self.policy.confidence

    def check(self, program: str, config: dict[str, Any]) -> None:
        """Any vote config (the features are task-agnostic); an -agg policy needs the run's family
        among those it has answer priors for."""
        if self.policy.config.answer != config.get("answer", "majority"):
            raise BadInput("OT623", f"this stop policy was trained to answer by {self.policy.config.answer} "
                           f"and the run answers by {config.get('answer', 'majority')} (set the run's "
                           f"answer with --set answer={self.policy.config.answer})", path=self.path)  # fmt: skip
        fam = config.get("family")
        if self.policy.aggregator is not None and fam not in self.priors:
            raise BadInput("OT623", f"the stop policy's aggregator has answer priors for the families "
                           f"{sorted(self.priors)}, the run's config family is {fam!r} (set it with "
                           "--set family=...)", path=self.path)  # fmt: skip

    def for_run(self, trace_id: str) -> StopPolicy:
        """A mixture draws which of its two policies runs once per run (seeded by the trace id)."""
        if self.policy.alt is None or self.policy.config.mixture is None:
            return self.policy
        h = hashlib.sha256(f"{self.policy.config.seed}|{trace_id}".encode()).digest()
        u = int.from_bytes(h[:8], "little") / 2**64
        return self.policy.alt if u < self.policy.config.mixture["prob"] else self.policy

    def features(self, ep: VoteEpisode) -> np.ndarray | None:
        """The policy's features of the episode's answers so far (None: an -agg policy asked on a
        family it has no prior for)."""
        budget = self.policy.config.budget
        agg, confidence = self.policy.aggregator, self.policy.confidence
        logprob = ep.logprob
        if confidence and logprob is None and all(a is None for a in ep.answers):
            logprob = [None] * len(ep.answers)  # only failed or unparsable answers so far: nothing votes
        if confidence and logprob is None:
            raise BadInput("OT624", f"the stop policy's feature set (counts+confidence) reads token "
                           f"log-probabilities, and the run's worker answers carry none (trace "
                           f"{ep.trace_id!r}): give the run --logprobs, or use a counts policy",
                           path=self.path)  # fmt: skip
        if agg is None:
            return prefix_features(ep.answers, budget, ep.costs, logprob=logprob, confidence=confidence)
        if ep.family not in self.priors:
            return None
        from .stopping.aggregate import candidate_statics
        from .stopping.features import features, logprob_array, prefix_table

        ids = answer_ids(ep.answers)
        labels = list(dict.fromkeys(a for a in ep.answers if a is not None))
        pt = prefix_table(ids, None if ep.costs is None else np.asarray(ep.costs, float))
        pt.static = candidate_statics(labels, ep.question, self.priors[ep.family], add_one=True)
        pt.logprob = None if logprob is None else logprob_array(logprob)
        return features(pt, budget, aggregator=agg, confidence=confidence)[-1]

    def decide(self, trace: Trace) -> TraceDecision | None:
        ep = episode_from_trace(trace)
        if not ep.answers:
            return None
        pol = self.for_run(trace.trace_id)
        x = self.features(ep)
        if x is None:
            return None
        p = float(pol.stop_prob(x[None])[0])
        if self.explore:
            h = hashlib.sha256(f"{pol.config.seed}|{trace.trace_id}|{len(ep.answers)}".encode()).digest()
            act = int.from_bytes(h[:8], "little") / 2**64 < p
        else:
            act = p >= pol.config.threshold
        return TraceDecision(int(act), p if act else 1.0 - p, features_hash(x), len(ep.answers), self.explore)


class LearnedAggregate:
    """A learned answer aggregator (O4) asked on a vote trace: which of the answers so far the run
    returns. Its candidates' statics need the family's answer prior, saved in the file (a run of a
    family the file has no prior for is refused)."""

    decision = "aggregate"

    def __init__(self, path: str, name: str) -> None:
        from .stopping.aggregate import load_aggregator

        self.aggregator, self.priors = load_aggregator(path)
        self.name, self.path = name, path

    def check(self, program: str, config: dict[str, Any]) -> None:
        fam = config.get("family")
        if fam not in self.priors:
            raise BadInput("OT623", f"the aggregator has answer priors for the families {sorted(self.priors)}, "
                           f"the run's config family is {fam!r} (set it with --set family=...)",
                           path=self.path)  # fmt: skip

    def decide(self, trace: Trace) -> TraceDecision | None:
        from .stopping.aggregate import candidate_features, candidate_statics
        from .stopping.features import answer_ids

        ep = episode_from_trace(trace)
        labels = list(dict.fromkeys(a for a in ep.answers if a is not None))
        if not labels or ep.family not in self.priors:
            return None
        ids = answer_ids(ep.answers)
        counts = np.bincount(ids[ids >= 0], minlength=len(labels))[None, :]
        valid = np.array([len(ids[ids >= 0])])
        static = candidate_statics(labels, ep.question, self.priors[ep.family], add_one=True)
        a = int(self.aggregator.answers(counts, valid, static)[0])
        prob = float(self.aggregator.features(counts, valid, static)[0, 0])
        x = candidate_features(counts, valid, static)[0]
        return TraceDecision(a, prob, features_hash(x), samples=len(ep.answers), answer=labels[a])


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
