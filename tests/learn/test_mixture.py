"""A sample budget as a randomised mixture of two trained policies (the constrained optimum)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.stopping.banks import SynthParams, synthetic_bank
from orchestrace.learn.stopping.evaluation import tables
from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
from orchestrace.learn.stopping.pool import build_pool
from orchestrace.learn.stopping.training import (
    _samples_each,
    calibrate_cost,
    mean_samples,
    mixture_prob,
    policy_rule,
)

PARAMS = SynthParams(a=1.0, b=1.0, distractors=3, alpha=0.5, samples=12)


def test_mixture_prob_hand_case() -> None:
    # 4 replays: the overspender draws 10 each, the other 2: switching 2 of 4 gives (20 + 4) / 4 = 6
    over, under = np.full(4, 10.0), np.full(4, 2.0)
    p = mixture_prob(over, under, 6.0, seed=3)
    draws = np.random.default_rng(3).random(4)
    assert int((draws < p).sum()) == 2
    assert mixture_prob(over, under, 5.9, seed=3) < p  # one switch fewer
    assert mixture_prob(over, under, 10.0, seed=3) == 1.0
    assert mixture_prob(over, under, 2.0, seed=3) == 0.0


def test_mixture_prob_skips_replays_that_would_overspend() -> None:
    # the replays switch in order of their draws; the largest count that fits is used
    draws = np.random.default_rng(0).random(3)
    order = np.argsort(draws)
    over = np.zeros(3)
    over[order] = [9.0, 1.0, 9.0]  # switching costs +7, then saves 1, then costs +7
    under = np.full(3, 2.0)
    # means after 0..3 switches: 2, 13/3, 4, 19/3
    assert mixture_prob(over, under, 3.0, seed=0) == 0.0
    p = mixture_prob(over, under, 4.0, seed=0)  # 4 after two switches fits, though 13/3 after one does not
    assert int((draws < p).sum()) == 2


def _policy(cost: float, bias: float) -> StopPolicy:
    pol = StopPolicy.init(PolicyConfig(cost=cost, hidden=[4]), seed=0)
    pol.weights[-1] = (pol.weights[-1][0] * 0, pol.weights[-1][1] * 0 + bias)
    return pol


def test_mixture_saves_loads_and_runs(tmp_path) -> None:
    bank = synthetic_bank(40, PARAMS, seed=1)
    reps = tables(bank, 12, 2, 0)
    first, last = _policy(0.02, 10.0), _policy(0.001, -10.0)  # stop at 1 sample; never stop (12)
    mix = first.mixed_with(last, 0.25)
    assert mix.config.mixture == {"prob": 0.25, "cost": 0.001}
    each = _samples_each(mix, reps, 12)
    assert set(each.tolist()) == {1.0, 12.0}
    draws = np.random.default_rng(mix.config.seed).random(len(each))
    np.testing.assert_array_equal(each == 12.0, draws < 0.25)  # the alt policy runs where u < p
    mix.save(str(tmp_path / "m"))
    back = StopPolicy.load(str(tmp_path / "m"))
    assert back.config.mixture == mix.config.mixture and back.alt is not None
    assert back.alt.config.cost == 0.001 and back.alt.config.mixture is None
    np.testing.assert_array_equal(_samples_each(back, reps, 12), each)  # same draws, same stops
    with pytest.raises(ValueError):
        StopPolicy(mix.config, mix.weights)  # a mixture config without its second policy


@pytest.mark.parametrize("bad", [[0.5, 0.01], {"prob": 1.5, "cost": 0.01}, {"prob": 0.5}])
def test_bad_mixture_config_is_a_clear_error(tmp_path, bad) -> None:
    mix = _policy(0.02, 1.0).mixed_with(_policy(0.001, -1.0), 0.5)
    mix.save(str(tmp_path / "m"))
    cfg = json.loads((tmp_path / "m.json").read_text())
    cfg["mixture"] = bad
    (tmp_path / "m.json").write_text(json.dumps(cfg))
    with pytest.raises(OrchestraceError) as e:
        StopPolicy.load(str(tmp_path / "m"))
    assert e.value.code == "OT622" and "m.json" in str(e.value)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        # each was taken as written: a threshold of 2 or NaN never stopped, "bogus" ran as relu, a
        # budget of "4" stayed a string, a NaN mixture cost was kept
        (lambda c: c.update(threshold=2.0), "threshold must be in [0, 1], got 2.0"),
        (lambda c: c.update(threshold=float("nan")), "threshold must be in [0, 1], got nan"),
        (lambda c: c.update(activation="bogus"), "activation 'bogus' is not tanh or relu"),
        (lambda c: c.update(budget="4"), "Expected `int`, got `str` - at `$.budget`"),
        (lambda c: c.update(hidden=[-1]), "hidden layer sizes must be >= 1"),
        (lambda c: c.update(cost=-1), "cost must be a finite number >= 0, got -1"),
        (lambda c: c.update(mixture={"prob": 0.5, "cost": float("nan")}), "mixture must be"),
    ],
)
def test_a_policy_config_with_values_out_of_range_is_refused(tmp_path, edit, said) -> None:
    _policy(0.02, 1.0).save(str(tmp_path / "p"))
    cfg = json.loads((tmp_path / "p.json").read_text())
    edit(cfg)
    (tmp_path / "p.json").write_text(json.dumps(cfg))
    with pytest.raises(OrchestraceError) as e:
        StopPolicy.load(str(tmp_path / "p"))
    assert e.value.code == "OT622" and e.value.path == str(tmp_path / "p.json") and said in e.value.message


def test_a_policy_config_that_is_not_utf8_is_refused(tmp_path) -> None:
    _policy(0.02, 1.0).save(str(tmp_path / "p"))
    (tmp_path / "p.json").write_bytes(b'{"budget": 4, "x": "\xff"}')  # UnicodeDecodeError, exit 3
    with pytest.raises(OrchestraceError, match="not UTF-8") as e:
        StopPolicy.load(str(tmp_path / "p"))
    assert e.value.code == "OT622"


def test_calibrated_mixture_spends_the_budget() -> None:
    train = synthetic_bank(150, PARAMS, seed=0)
    held = synthetic_bank(60, PARAMS, seed=5)
    pool = build_pool(train, budget=12, perms=4, seed=0)
    fast = dict(pool=pool, budget=12, seed=0, iterations=15, steps=5, orders=2)
    pure, c, used_pure = calibrate_cost(train, held, 3.0, mix=False, **fast)
    mixed, c_mix, used = calibrate_cost(train, held, 3.0, **fast)
    assert c_mix == c and pure.alt is None
    assert used_pure <= used <= 3.0  # the mixture spends what the pure policy leaves unspent
    assert used == mean_samples(mixed, tables(held, 12, 2, 1), 12)
    # here the pure policy jumps to 1 sample; the alt policy (a lower cost) overspends alone
    assert mixed.alt is not None and mixed.config.mixture is not None
    alt_used = mean_samples(mixed.alt, tables(held, 12, 2, 1), 12)
    assert mixed.alt.config.cost < c and alt_used > 3.0
    assert 0 < mixed.config.mixture["prob"] < 1
    assert used > used_pure + 1
    rule = policy_rule(mixed)
    assert rule(tables(held, 12, 1, 0)[0][0], 12) in range(1, 13)
    _, _, again = calibrate_cost(train, held, 3.0, **fast)
    assert again == used  # same seed, same mixture, same draws


def test_a_policy_config_with_a_byte_order_mark_is_read(tmp_path) -> None:
    _policy(0.02, 1.0).save(str(tmp_path / "p"))
    (tmp_path / "p.json").write_bytes(b"\xef\xbb\xbf" + (tmp_path / "p.json").read_bytes())  # was OT622
    assert StopPolicy.load(str(tmp_path / "p")).config.cost == 0.02
