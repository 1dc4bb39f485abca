"""Confidence-weighted stopping: weights follow the replayed samples, the rules stop where the
weighted votes say, and leave-one-family-out picks every setting without the held-out family."""

from __future__ import annotations

import math

import numpy as np
import pytest

from orchestrace.learn.stopping.banks import Bank, BankQuestion
from orchestrace.learn.stopping.confidence import lofo_confidence
from orchestrace.learn.stopping.features import replay_table
from orchestrace.learn.stopping.rules import confidence_answer, confidence_margin, confidence_share
from orchestrace.runtime.backends.base import LogprobSummary


def _q(samples, probs, qid="q", gold="a"):
    lp = [LogprobSummary(math.log(p), math.log(p) - 1.0, 2) for p in probs]
    return BankQuestion(qid, qid, gold, samples, logprob=lp)


def test_weights_follow_the_replay_order():
    q = _q(["a", "b", "a"], [0.9, 0.1, 0.5])
    pt = replay_table(q, np.array([2, 0, 1]))
    assert np.allclose(np.exp(pt.logprob[:, 0]), [0.5, 0.9, 0.1])
    assert np.allclose(np.exp(pt.logprob[:, 1]), np.array([0.5, 0.9, 0.1]) / math.e)


def test_margin_and_share_stop_on_weighted_votes():
    pt = replay_table(_q(["a", "b", "a", "a"], [0.9, 0.1, 0.9, 0.9]), np.arange(4))
    # weighted a - b after 1, 2, 3 samples: 0.9, 0.8, 1.7
    assert confidence_margin(0.75)(pt, 4) == 1
    assert confidence_margin(0.95)(pt, 4) == 3
    assert confidence_margin(5.0)(pt, 4) == 4  # never: the budget
    # weighted share of a after 2 samples: 0.9 / 1.0
    # weighted share of a: 0.9 / 1.0 after 2, 1.8 / 1.9 = 0.947 after 3, 2.7 / 2.8 = 0.964 after 4
    assert confidence_share(0.9)(pt, 4) == 2 and confidence_share(0.95)(pt, 4) == 4


def test_weighted_answer_can_overrule_the_majority():
    pt = replay_table(_q(["x", "y", "y"], [0.9, 0.2, 0.2], gold="x"), np.arange(3))
    assert int(pt.majority[2]) == 1 and confidence_answer("mean")(pt, 3) == 0


def test_a_bank_without_logprobs_is_refused():
    pt = replay_table(BankQuestion("q", "q", "a", ["a", "b"]), np.arange(2))
    with pytest.raises(ValueError, match="log-probabilities"):
        confidence_margin(1.0)(pt, 2)


def _bank(name, seed, n=12, samples=8):
    rng = np.random.default_rng(seed)
    qs = []
    for i in range(n):
        p = rng.uniform(0.2, 0.9)
        s = ["a" if rng.random() < p else f"w{rng.integers(3)}" for _ in range(samples)]
        probs = [rng.uniform(0.5, 1.0) if x == "a" else rng.uniform(0.05, 0.8) for x in s]
        qs.append(_q(s, probs, f"{name}{i}"))
    return Bank(name, qs)


def test_settings_are_picked_without_the_held_out_family():
    banks = [_bank("f0", 0), _bank("f1", 1), _bank("f2", 2)]
    first = lofo_confidence(banks, budget=8, orders=2, seed=0)
    rows, settings = first.rows, first.settings
    # the held-out family turned into traps (two confident wrong answers, then six right ones):
    # its figures move, its chosen settings do not, while the families that train on it change
    trap = [_q(["w1", "w1"] + ["a"] * 6, [0.99, 0.99] + [0.6] * 6, f"t{i}") for i in range(40)]
    noisy = Bank("f0", trap)
    second = lofo_confidence([noisy, banks[1], banks[2]], budget=8, orders=2, seed=0)
    rows2, settings2 = second.rows, second.settings
    assert settings2["f0"] == settings["f0"]
    acc = {(r.family, r.method): r.accuracy for r in rows}
    acc2 = {(r.family, r.method): r.accuracy for r in rows2}
    assert acc2[("f0", "fixed-8")] == 1 and acc2[("f0", "fixed-1")] < 1 and acc != acc2
    assert any(settings2[f] != settings[f] for f in ("f1", "f2"))  # they do train on f0
