"""Stopping baselines against hand-computed cases."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrace.core.stats import pareto_front
from orchestrace.learn.stopping.banks import NULL, Bank, BankQuestion, SynthParams, synthetic_bank
from orchestrace.learn.stopping.evaluation import (
    Result,
    bootstrap_ci,
    paired_reward_ratio_ci,
    run_methods,
)
from orchestrace.learn.stopping.features import beta_confidence, prefix_table
from orchestrace.learn.stopping.rules import (
    Sprt,
    ac_beta,
    ac_dirichlet,
    consol_sprt,
    dirichlet_leader_prob,
    entropy_rule,
    esc,
    esc_expected_samples,
    fixed_k,
    hindsight_oracle,
    majority_share,
)


def pt_of(seq: str):
    """'aab.' -> answer ids by first appearance; '.' is a null sample."""
    ids: dict[str, int] = {}
    return prefix_table(np.array([NULL if ch == "." else ids.setdefault(ch, len(ids)) for ch in seq]))


def test_beta_rule_worked_example() -> None:
    # (4, 0): 1 - 0.5^5 = 0.96875 >= 0.95 stops; (3, 0): 1 - 0.5^4 = 0.9375 continues
    assert beta_confidence(np.array([4]), np.array([0]))[0] == pytest.approx(0.96875)
    assert beta_confidence(np.array([3]), np.array([0]))[0] == pytest.approx(0.9375)
    assert ac_beta(0.95)(pt_of("aaaaaaaa"), 40) == 4
    # P(Beta(v1+1, v2+1) > 1/2) = P(Binomial(v1+v2+1, 1/2) <= v1)
    # (4, 1): 1 - 7/64 = 0.8906; (5, 1): 1 - 8/128 = 0.9375 (continue); (6, 1): 1 - 9/256 = 0.9648 (stop)
    assert beta_confidence(np.array([4, 5, 6]), np.array([1, 1, 1])) == pytest.approx(
        [57 / 64, 0.9375, 247 / 256]
    )
    assert ac_beta(0.95)(pt_of("abaaaaa"), 40) == 7


def test_dirichlet_exact_matches_monte_carlo() -> None:
    rng = np.random.default_rng(0)
    g = rng.dirichlet([5, 2, 2], size=400_000)
    mc = (g[:, 0] > g[:, 1:].max(1)).mean()
    assert dirichlet_leader_prob((4, 1, 1)) == pytest.approx(mc, abs=0.003)
    # two answers reduce to the Beta rule: P(Beta(5,2) > 0.5) = 1 - 7/64
    assert dirichlet_leader_prob((4, 1)) == pytest.approx(1 - 7 / 64, abs=1e-4)
    # fewer than 3 distinct answers: Dirichlet rule = Beta rule
    assert ac_dirichlet(0.95)(pt_of("aaaaaa"), 40) == 4


def test_esc_windows_and_expected_cost() -> None:
    assert esc(5)(pt_of("aaaaa" + "b" * 10), 40) == 5
    assert esc(5)(pt_of("aaaab" + "ccccc" + "d" * 30), 40) == 10
    assert esc(5)(pt_of("aaaa." + "ab" * 20), 40) == 40  # a null breaks unanimity; budget
    # hand-computed: q = 0.5^2 + 0.5^2 = 0.5, w = 2, L = 6 -> E[N] = 2 [0.5*1 + 0.25*2 + 0.25*3] = 3.5
    assert esc_expected_samples(np.array([0.5, 0.5]), 2, 6) == pytest.approx(3.5)
    # and a simulation agrees with the formula
    rng = np.random.default_rng(1)
    probs = np.array([0.6, 0.3, 0.1])
    ns = [esc(5)(prefix_table(_relabel(rng.choice(3, 40, p=probs))), 40) for _ in range(4000)]
    assert np.mean(ns) == pytest.approx(esc_expected_samples(probs, 5, 40), rel=0.03)


def _relabel(a: np.ndarray) -> np.ndarray:
    from orchestrace.learn.stopping.features import relabel

    return relabel(a)


def test_consol_sprt_defaults_need_a_three_vote_lead() -> None:
    s = Sprt()
    assert not s.test(2, 0) and s.test(3, 0) and s.test(5, 2) and not s.test(5, 3)
    assert s.trials(0, 0, 40) == 3
    assert consol_sprt()(pt_of("aaab" + "a" * 10), 40) == 3
    # a, b, a: lead 1 after 3 -> draws 2 more (a, a) -> lead 3 at 5
    assert consol_sprt()(pt_of("abaaa" + "b" * 10), 40) == 5


def test_fixed_majority_entropy_oracle() -> None:
    pt = pt_of("abbbaaaaaa")
    assert fixed_k(3)(pt, 40) == 3
    assert majority_share(0.8)(pt_of("aaab"), 40) == 2
    # entropy in bits of (a, b) counts: (1, 1) 1, (2, 1) 0.918, (3, 1) 0.811, (4, 1) 0.722 <= 0.75
    assert entropy_rule(0.75)(pt_of("ab" + "a" * 8), 40) == 5
    # a lone answer is padded with a 1: (t, 1) again, so unanimity also stops at t = 4
    assert entropy_rule(0.75)(pt_of("a" * 10), 40) == 4
    # full majority of 'abbbaaaaaa' is a (7 vs 3); first prefix with majority a: t = 1
    assert hindsight_oracle()(pt, 10) == 1
    assert hindsight_oracle()(pt_of("bbaaaaa"), 7) == 5  # counts at 5: a 3, b 2


def test_run_methods_and_bootstrap_on_a_bank() -> None:
    qs = [
        BankQuestion("q1", "?", "a", ["a", "b", "a", "a"]),
        BankQuestion("q2", "?", "x", ["y", None, "y", "x"]),
    ]
    bank = Bank("t", qs)
    from orchestrace.learn.stopping.rules import Method

    res = run_methods(bank, [Method("fixed-1", "fixed-k", 1, fixed_k(1))], 4)[0]
    assert res.correct.tolist() == [True, False] and res.mean_samples == 1
    ci = bootstrap_ci(res, n_boot=200, seed=0)
    # a resample of the two questions is right 0, 1/2 or 1 of the time, the ends 1/4 of the draws
    # each (about 50 of 200): the 2.5th and 97.5th percentiles are the ends; one sample each
    assert ci.accuracy == pytest.approx((0.0, 1.0)) and ci.mean_samples == pytest.approx((1.0, 1.0))


def test_paired_reward_ratio_ci_by_hand() -> None:
    # rewards at c = 0.01: a [0.5, 0.1], b [0.5, 0.3]; a resample of 2 questions is q1 q1 (ratio 1),
    # mixed (0.6 / 0.8 = 0.75) or q2 q2 (1/3), the two extremes 1/4 of the time each
    a = Result("a", "x", 0, np.array([50.0, 40.0]), np.array([1.0, 0.5]))
    b = Result("b", "x", 0, np.array([50.0, 20.0]), np.array([1.0, 0.5]))
    assert paired_reward_ratio_ci(a, b, 0.01) == pytest.approx((1 / 3, 1.0))
    assert paired_reward_ratio_ci(a, a, 0.01) == pytest.approx((1.0, 1.0))


def test_pareto_front() -> None:
    pts = [(1, 0.3), (2, 0.5), (3, 0.4), (4, 0.6), (5, 0.6)]
    assert pareto_front(pts) == [(1, 0.3), (2, 0.5), (4, 0.6)]


def test_synthetic_bank_is_seeded_and_calibrated() -> None:
    a = synthetic_bank(20, SynthParams(), seed=3)
    b = synthetic_bank(20, SynthParams(), seed=3)
    assert [q.samples for q in a.questions] == [q.samples for q in b.questions]
    from orchestrace.learn.stopping.banks import calibrate

    big = synthetic_bank(1500, SynthParams(a=2.0, b=3.0, null_rate=0.1), seed=0)
    fit = calibrate(big)
    assert fit.a / (fit.a + fit.b) == pytest.approx(0.4, abs=0.03)
    assert fit.null_rate == pytest.approx(0.1, abs=0.01)
