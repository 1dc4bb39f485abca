"""Bayes-optimal stopping for synthetic banks, by dynamic programming over vote-count states.

The generative model is ``SynthParams``: correct-answer probability p ~ Beta(a, b), K wrong
answers sharing 1 - p with proportions ~ Dirichlet(alpha), nulls with probability nu. Answer
labels are anonymous, so the state is the multiset of vote counts (sorted) plus the number of
draws t. Hypothesis H_j says label j is the correct answer, H_0 that it has not been seen yet;
their posteriors are closed-form (Beta and Dirichlet-multinomial marginals times the number of
ways to map labels to distractor identities). The value of stopping is max_j P(H_j) (answer the
MAP label); of continuing, -c + E[V(next)]. Reward = correctness - c x samples, as in StopVote.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .banks import SynthParams
from .features import PrefixTable

State = tuple[tuple[int, ...], int]


class BayesStopper:
    """The optimal stop/continue decision for every state, under ``params`` and cost c.

    ``answer="map"`` answers the most probable label (the overall limit: stopping and aggregation
    both optimal); ``answer="majority"`` answers the majority label, so the DP gives the best
    stopping rule for majority voting, the decision class of the learned StopVote policies.
    """

    def __init__(
        self,
        params: SynthParams,
        cost: float,
        budget: int,
        answer: str = "map",
        posteriors: dict[tuple[int, ...], list[float]] | None = None,
    ) -> None:
        self.answer = answer
        self.p = params
        self.c = cost
        self.budget = budget
        self.value = lru_cache(maxsize=None)(self._value)
        # posteriors depend on the params only: stoppers at several costs may share them
        self._post: dict[tuple[int, ...], list[float]] = {} if posteriors is None else posteriors

    def posterior(self, counts: tuple[int, ...]) -> list[float]:
        """[P(H_0), P(H_1), ..., P(H_m)] for sorted counts c_1 >= ... >= c_m."""
        post = self._post.get(counts)
        if post is not None:
            return post
        logs = hypothesis_logs(self.p, counts)
        top = max(logs)
        w = [math.exp(x - top) for x in logs]
        z = sum(w)
        post = [x / z for x in w]
        self._post[counts] = post
        return post

    def predictive(self, counts: tuple[int, ...]) -> tuple[list[float], float]:
        """P(next valid sample is label i) for each seen label, and P(it is a new label)."""
        a, b, k, al = self.p.a, self.p.b, self.p.distractors, self.p.alpha
        m, n = len(counts), sum(counts)
        post = self.posterior(counts)
        p_old = [0.0] * m
        p_new = 0.0
        if post[0] > 0:  # H_0: the correct answer is still unseen
            wrong = (b + n) / (a + b + n)
            for i, c in enumerate(counts):
                p_old[i] += post[0] * wrong * (al + c) / (k * al + n)
            p_new += post[0] * (a / (a + b + n) + wrong * (k - m) * al / (k * al + n))
        for j, cj in enumerate(counts):
            pj = post[j + 1]
            if pj == 0:
                continue
            rest = n - cj
            right = (a + cj) / (a + b + n)
            wrong = 1 - right
            for i, c in enumerate(counts):
                if i != j:
                    p_old[i] += pj * wrong * (al + c) / (k * al + rest)
            p_old[j] += pj * right
            p_new += pj * wrong * (k - (m - 1)) * al / (k * al + rest)
        return p_old, p_new

    def stop_value(self, counts: tuple[int, ...]) -> float:
        if not counts:
            return 0.0
        post = self.posterior(counts)
        return post[1] if self.answer == "majority" else max(post[1:])

    def _value(self, counts: tuple[int, ...], t: int) -> float:
        stop = self.stop_value(counts)
        if t >= self.budget:
            return stop
        return max(stop, self.continue_value(counts, t))

    def continue_value(self, counts: tuple[int, ...], t: int) -> float:
        nu = self.p.null_rate
        ev = nu * self.value(counts, t + 1) if nu > 0 else 0.0
        p_old, p_new = self.predictive(counts) if counts else ([], 1.0)
        for i, pi in enumerate(p_old):
            nxt = list(counts)
            nxt[i] += 1
            ev += (1 - nu) * pi * self.value(tuple(sorted(nxt, reverse=True)), t + 1)
        if p_new > 0:
            ev += (1 - nu) * p_new * self.value((*counts, 1), t + 1)
        return ev - self.c

    def should_stop(self, counts: tuple[int, ...], t: int) -> bool:
        return t >= self.budget or self.value(counts, t) <= self.stop_value(counts) + 1e-12

    def expected_reward(self, first_draw: int = 1) -> float:
        """Expected reward of the optimal policy, counting the forced first draw(s)."""
        if first_draw == 0:
            return self.value((), 0)
        return self.continue_value((), 0)

    def run(self, pt: PrefixTable) -> tuple[int, int]:
        """(samples used, answer id) of the optimal policy on one sample sequence. A real sequence
        may hold more labels than the model's K distractors + 1: the smallest beyond K + 1 are
        dropped from the state (the model gives them probability 0)."""
        budget = min(self.budget, pt.length)
        for t in range(1, budget + 1):
            row = pt.counts[t - 1]
            ids = np.flatnonzero(row)
            order = ids[np.argsort(-row[ids], kind="stable")][: self.p.distractors + 1]
            counts = tuple(int(row[i]) for i in order)
            if t >= budget or self.should_stop(counts, t):
                if not counts:
                    return t, -1
                if self.answer == "majority":
                    return t, int(order[0])
                post = self.posterior(counts)[1:]
                return t, int(order[int(np.argmax(np.array(post)))])
        raise AssertionError("unreachable")


def hypothesis_logs(params: SynthParams, counts: tuple[int, ...]) -> list[float]:
    """log P(sequence with these sorted label counts, H_j) for H_0 (the correct answer unseen)
    and H_1..H_m, up to a constant that depends on the counts only (not on ``params``).
    Needs at most K + 1 labels (``params.distractors`` = K)."""
    a, b, k, al = params.a, params.b, params.distractors, params.alpha
    m, n = len(counts), sum(counts)
    lg = math.lgamma
    dist_all = sum(lg(al + c) for c in counts) - m * lg(al)
    base = lg(k * al) - _betaln(a, b) + dist_all
    logs = [-math.inf] * (m + 1)
    if m <= k:  # H_0: every seen label is a distractor
        logs[0] = base + _betaln(a, b + n) - lg(k * al + n) + _log_falling(k, m)
    if m - 1 <= k:
        for j, cj in enumerate(counts):
            rest = n - cj
            logs[j + 1] = (
                base
                + _betaln(a + cj, b + rest)
                - lg(k * al + rest)
                - (lg(al + cj) - lg(al))
                + _log_falling(k, m - 1)
            )
    return logs


def log_evidence(params: SynthParams, counts: tuple[int, ...]) -> float:
    """log P(a sequence with these sorted label counts | params), up to a params-free constant:
    what a label-free fit of ``params`` maximises (``adapt.fit_label_free``)."""
    logs = hypothesis_logs(params, counts)
    top = max(logs)
    return top + math.log(sum(math.exp(x - top) for x in logs)) if top > -math.inf else -math.inf


def _log_falling(k: int, m: int) -> float:
    """log(k! / (k - m)!), the ways to give m labels distinct identities among k."""
    return math.lgamma(k + 1) - math.lgamma(k - m + 1)


def _betaln(x: float, y: float) -> float:
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
