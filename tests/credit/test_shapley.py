"""Shapley values on closed-form games and the axioms."""

import itertools
import math
import tracemalloc

import numpy as np
import pytest

from orchestrace.credit import FnGame, leave_one_out, shapley
from orchestrace.credit import game as game_module
from orchestrace.credit.game import Game


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


class _AdditiveGame(Game):
    """v(S) = sum of the members' weights, vectorised (every marginal is that player's weight)."""

    def __init__(self, w: np.ndarray) -> None:
        self.players, self.w = [f"p{i}" for i in range(len(w))], w

    def batch(self, masks: np.ndarray) -> np.ndarray:
        return np.array([self.w[m].sum() for m in masks])


def test_sampled_shapley_builds_its_coalition_masks_in_bounded_memory(monkeypatch):
    # all prefixes of all permutations at once took samples * n * n bytes: 24 GiB for 10,000
    # agents (credit --method shapley on a 10,000-agent trace died with a MemoryError)
    n, samples = 300, 64  # all at once: 64 * 301 * 300 bytes = 5.8 MB of masks
    w = np.linspace(-1.0, 2.0, n)
    monkeypatch.setattr(game_module, "MASK_BYTES", 1 << 20, raising=False)
    tracemalloc.start()
    try:
        res = shapley(_AdditiveGame(w), samples=samples, seed=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 << 19  # 2.5 MB
    assert not res.exact and res.evaluations == samples * (n + 1)
    assert list(res.values.values()) == pytest.approx(w.tolist())
