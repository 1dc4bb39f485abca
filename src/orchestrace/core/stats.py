"""Statistics every report shares: bootstrap confidence intervals, the Pareto front, the majority vote.

One percentile bootstrap everywhere, so a CI printed by ``eval``, ``train`` or ``loop`` means the
same thing: resample the items (questions, tasks) with replacement, take the mean, read the
percentiles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np


def bootstrap_means(columns: Sequence[np.ndarray], n_boot: int = 1000, seed: int = 0) -> list[np.ndarray]:
    """Means of each column over the same ``n_boot`` resamples of the items (paired columns stay
    paired: a resample picks the same items in every column)."""
    rng = np.random.default_rng(seed)
    n = len(columns[0])
    idx = rng.integers(0, n, size=(n_boot, n))
    return [np.asarray(c)[idx].mean(axis=1) for c in columns]


def percentile_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap values (0.95: the 2.5th and 97.5th percentiles)."""
    alpha = round(1 - level, 12)  # 1 - 0.95 is 0.050000000000000044 in floating point
    return float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))


def mean_ci(
    x: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> tuple[float, tuple[float, float]]:
    """The mean of ``x`` over items (or of a paired difference) and its percentile bootstrap CI;
    NaN for no items."""
    x = np.asarray(x, dtype=np.float64)
    if not len(x):
        return float("nan"), (float("nan"), float("nan"))
    return float(x.mean()), percentile_ci(bootstrap_means([x], n_boot, seed)[0], level)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (cost, quality) points by increasing cost: lower cost and higher quality win."""
    front: list[tuple[float, float]] = []
    for x, y in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or y > front[-1][1]:
            front.append((x, y))
    return front


def majority(votes: Iterable[str | None]) -> str | None:
    """The most common vote, ties to the one seen first (deterministic; ``Counter.most_common``
    order); None votes (unparsable answers) never win, and no vote at all gives None. The one
    majority of the vote and debate programs, StopVote's traces and ``loop stop``."""
    seen = [v for v in votes if v is not None]
    if not seen:
        return None
    return Counter(seen).most_common(1)[0][0]
