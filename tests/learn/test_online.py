"""The online-adapted learned stopping policy: no label read, no undrawn sample read (seconds)."""

from __future__ import annotations

from functools import cache

import numpy as np

from orchestrace.learn.stopping.adapt import fit_counts, fit_label_free, label_counts
from orchestrace.learn.stopping.banks import Bank, BankQuestion, SynthParams, synthetic_bank
from orchestrace.learn.stopping.evaluation import tables
from orchestrace.learn.stopping.online import (
    FamilyPrior,
    adaptive_stopper,
    family_priors,
    posteriors,
    run_online,
    train_adaptive,
)
from orchestrace.learn.stopping.policy import StopPolicy
from orchestrace.learn.stopping.training import merge

BUDGET = 10


def _fams() -> list[Bank]:
    return [
        synthetic_bank(40, SynthParams(a=a, b=b, alpha=al, samples=BUDGET), seed=s, name=n)
        for n, a, b, al, s in (("easy", 4, 1, 0.5, 1), ("hard", 1, 2, 0.3, 2))
    ]


@cache
def _policy() -> tuple[StopPolicy, SynthParams]:
    train = merge(_fams(), "train")
    return train_adaptive(train, 0.01, budget=BUDGET, seed=0, iterations=40), fit_label_free(train, BUDGET)


def _held() -> Bank:
    return synthetic_bank(24, SynthParams(a=2, b=1, alpha=1.0, samples=BUDGET), seed=7, name="held")


def test_each_training_family_gets_its_own_label_free_prior() -> None:
    priors = family_priors(merge(_fams(), "train"), BUDGET)
    easy, hard = priors[0].params, priors[-1].params
    assert easy.a / (easy.a + easy.b) > hard.a / (hard.a + hard.b) + 0.2


def test_majority_posterior_grows_with_agreement() -> None:
    prior = FamilyPrior.of(SynthParams(a=2, b=1, alpha=1.0, samples=BUDGET))
    one, five, split = posteriors(prior, (1,)), posteriors(prior, (5,)), posteriors(prior, (3, 2))
    assert five[0] > split[0] and five[0] > one[0] and one[1] > five[1]
    assert all(0 <= p <= 1 for p in (*one, *five, *split))


def _tail_replaced(bank: Bank, used: np.ndarray) -> Bank:
    """Every sample after the first ``used[i]`` of question i replaced by one new wrong answer."""
    qs = []
    for q, k in zip(bank.questions, used, strict=True):
        k = int(k)
        qs.append(BankQuestion(q.id, q.question, q.gold, q.samples[:k] + ["zzz"] * (len(q.samples) - k)))
    return Bank(bank.name, qs, {})


def test_the_online_prior_reads_only_the_samples_drawn() -> None:
    pol, start = _policy()
    held = _held()
    first = run_online(
        held, tables(held, BUDGET, 1), adaptive_stopper(pol), start, "o", "o", 0.01, refits=(4, 8)
    )
    assert first.mean_samples < BUDGET - 1  # it stops early, so there are undrawn samples to hide
    other = _tail_replaced(held, first.n_used)
    # the undrawn samples carry a different prior: a method that read them would see another family
    full = [fit_counts(label_counts(b, BUDGET), 0.0, BUDGET) for b in (held, other)]
    assert abs(full[0].a / (full[0].a + full[0].b) - full[1].a / (full[1].a + full[1].b)) > 0.05
    again = run_online(
        other, tables(other, BUDGET, 1), adaptive_stopper(pol), start, "o", "o", 0.01, refits=(4, 8)
    )
    assert np.array_equal(first.n_used, again.n_used) and np.array_equal(first.correct, again.correct)


def test_the_online_policy_reads_no_label() -> None:
    pol, start = _policy()
    held = _held()
    blind = Bank(held.name, [BankQuestion(q.id, q.question, None, q.samples) for q in held.questions], {})
    runs = [
        run_online(
            b, tables(b, BUDGET, 2, seed=3), adaptive_stopper(pol), start, "o", "o", 0.01, refits=(4, 8)
        )
        for b in (held, blind)
    ]
    assert np.array_equal(runs[0].n_used, runs[1].n_used)
    assert not np.array_equal(runs[0].correct, runs[1].correct)  # scored by truth vs by agreement
