"""Adaptation without labels: the answer-distribution prior of a new task from its unlabelled
samples, then the Bayes-optimal stopping rule for that prior (``bayes.BayesStopper``).

``calibrate`` fits ``SynthParams`` with the labels (which answer is right). A task nobody has
labelled gives only its samples; the vote counts still carry the prior, because the model
(p_correct ~ Beta(a, b), K distractors with Dirichlet(alpha) shares) gives every multiset of
counts a marginal likelihood summed over which label is the right one (``bayes.log_evidence``).
``fit_label_free`` maximises it over (a, b, alpha) on a split of questions whose samples are
drawn and counted apart (the calibration half in ``transfer.leave_one_family_out``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from .banks import NULL, Bank, SynthParams
from .bayes import BayesStopper, log_evidence
from .features import PrefixTable

DISTRACTORS = 5
PARAM_RANGE = (0.02, 50.0)


def label_counts(bank: Bank, budget: int, distractors: int = DISTRACTORS) -> list[tuple[int, ...]]:
    """Each question's sorted vote counts over its first ``budget`` samples, the K + 1 largest."""
    out = []
    for q in bank.questions:
        a = q.answers[:budget]
        c = np.bincount(a[a != NULL]) if (a != NULL).any() else np.zeros(0, int)
        out.append(tuple(int(x) for x in sorted(c[c > 0], reverse=True)[: distractors + 1]))
    return out


def fit_label_free(bank: Bank, budget: int = 40, distractors: int = DISTRACTORS) -> SynthParams:
    """``SynthParams`` by maximum marginal likelihood of the vote counts; never reads ``gold``
    or ``correct``. The null rate is the share of null samples."""
    nulls = float(np.mean([(q.answers[:budget] == NULL).mean() for q in bank.questions]))
    try:
        return fit_counts(label_counts(bank, budget, distractors), nulls, budget, distractors)
    except ValueError:
        raise ValueError(f"bank {bank.name!r} has no valid sample to fit a prior on") from None


def fit_counts(
    counts: list[tuple[int, ...]], null_rate: float, budget: int = 40, distractors: int = DISTRACTORS
) -> SynthParams:
    """``SynthParams`` maximising the marginal likelihood of questions' sorted vote counts. The
    counts may be of prefixes of any length, stopped by any rule that reads only the samples:
    the likelihood of a stopped sequence is that of its counts (the stopping rule drops out).
    Deterministic (Nelder-Mead on log parameters from a fixed start)."""
    from scipy.optimize import minimize

    seen = Counter(c for c in counts if c)
    if not seen:
        raise ValueError("no valid sample to fit a prior on")
    lo, hi = np.log(PARAM_RANGE)

    def params(x: np.ndarray) -> SynthParams:
        a, b, al = np.exp(np.clip(x, lo, hi))
        return SynthParams(float(a), float(b), distractors, float(al), null_rate, budget)

    def loss(x: np.ndarray) -> float:
        p = params(x)
        return -sum(n * log_evidence(p, c) for c, n in seen.items()) / seen.total()

    res = minimize(
        loss, np.log([0.5, 0.5, 1.0]), method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-6}
    )
    p = params(res.x)
    return SynthParams(
        round(p.a, 4), round(p.b, 4), distractors, round(p.alpha, 4), round(null_rate, 4), budget
    )


def bayes_stoppers(
    params: SynthParams, costs: list[float], budget: int
) -> list[tuple[float, Callable[[PrefixTable], tuple[int, int]]]]:
    """The Bayes-optimal stop rule (answering the majority, the decision class of the rules and
    the learned policies) at each cost, sharing one posterior table."""
    shared: dict[tuple[int, ...], list[float]] = {}
    return [(c, BayesStopper(params, c, budget, answer="majority", posteriors=shared).run) for c in costs]
