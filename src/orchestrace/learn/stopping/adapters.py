"""The saved stop policy and the saved answer aggregator as runtime decision adapters: each answers
``decide(trace)`` on a vote run's trace so far, through the same feature function as its training
and offline evaluation (``features.prefix_features``). ``learn.policies.load_policy`` loads them
with the adapters of the other decisions."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from ...core.errors import BadInput
from ...core.model import Trace
from ...runtime.learned import TraceDecision
from .aggregate import AnswerPrior, candidate_features, candidate_statics, load_aggregator, priors_from_json
from .features import answer_ids, features, features_hash, logprob_array, prefix_features, prefix_table
from .policy import StopPolicy
from .traces import VoteEpisode, episode_from_trace


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
        self.aggregator, self.priors = load_aggregator(path)
        self.name, self.path = name, path

    def check(self, program: str, config: dict[str, Any]) -> None:
        fam = config.get("family")
        if fam not in self.priors:
            raise BadInput("OT623", f"the aggregator has answer priors for the families {sorted(self.priors)}, "
                           f"the run's config family is {fam!r} (set it with --set family=...)",
                           path=self.path)  # fmt: skip

    def decide(self, trace: Trace) -> TraceDecision | None:
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
