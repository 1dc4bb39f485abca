"""Shapley values on closed-form games and the axioms."""

import itertools
import math

import numpy as np
import pytest

from orchestrace.credit import FnGame, leave_one_out, shapley


def glove(left: set[str]):
    return lambda s: min(len(s & left), len(s - left))


def test_glove_game_exact():
    g = FnGame(["L", "R1", "R2"], glove({"L"}))
    res = shapley(g)
    assert res.exact
    assert res.values == pytest.approx({"L": 2 / 3, "R1": 1 / 6, "R2": 1 / 6})


def test_majority_games():
    res = shapley(FnGame(list("abc"), lambda s: float(len(s) >= 2)))
    assert res.values == pytest.approx(dict.fromkeys("abc", 1 / 3))
    w = {"a": 2, "b": 1, "c": 1}  # weighted majority [3; 2, 1, 1]
    res = shapley(FnGame(list("abc"), lambda s: float(sum(w[p] for p in s) >= 3)))
    assert res.values == pytest.approx({"a": 2 / 3, "b": 1 / 6, "c": 1 / 6})


def test_additive_game_exact_and_sampled():
    w = {f"p{i}": 0.5 * i - 2 for i in range(15)}
    game = FnGame(list(w), lambda s: sum(w[p] for p in s))
    small = FnGame(list(w)[:5], lambda s: sum(w[p] for p in s))
    assert shapley(small).values == pytest.approx({p: w[p] for p in list(w)[:5]})
    res = shapley(game, samples=8, seed=1)  # 15 players -> permutation sampling
    assert not res.exact
    assert res.values == pytest.approx(w)  # every marginal of an additive game is exact
    assert max(res.stderr.values()) == pytest.approx(0.0, abs=1e-12)
    assert leave_one_out(game) == pytest.approx(w)


def test_sampled_glove_within_error_estimate():
    n_right = 13  # 14 players: 1 left glove, 13 right gloves; phi(L) = n/(n+1), phi(R) = 1/(n(n+1))
    players = ["L"] + [f"R{i}" for i in range(n_right)]
    res = shapley(FnGame(players, glove({"L"})), samples=400, seed=3)
    assert not res.exact
    assert abs(res.values["L"] - n_right / (n_right + 1)) <= 4 * res.stderr["L"] + 1e-9
    assert sum(res.values.values()) == pytest.approx(
        1.0
    )  # each permutation's marginals sum to v(N) - v(empty)
    assert 0 < res.stderr["L"] < 0.05


def test_efficiency_and_symmetry_axioms_random_game():
    rng = np.random.default_rng(7)
    players = list("abcdef")
    table = {}
    for r in range(len(players) + 1):
        for s in itertools.combinations(players, r):
            key = frozenset(s)
            # players a and b are symmetric: swapping them leaves v unchanged
            twin = frozenset({"a": "b", "b": "a"}.get(p, p) for p in s)
            table[key] = table.get(twin, float(rng.normal()))
    res = shapley(FnGame(players, lambda s: table[s]))
    assert sum(res.values.values()) == pytest.approx(table[frozenset(players)] - table[frozenset()])
    assert res.values["a"] == pytest.approx(res.values["b"])
    assert not math.isclose(res.values["c"], res.values["d"])


def test_sampling_is_seeded():
    g = FnGame([f"p{i}" for i in range(13)], lambda s: float(len(s) >= 7))
    assert shapley(g, samples=20, seed=5).values == shapley(g, samples=20, seed=5).values
