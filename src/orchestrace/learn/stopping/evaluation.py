"""Evaluation of stopping methods on a bank: accuracy, mean samples, bootstrap CIs, Pareto fronts.

Every method sees the same draws: each question replayed in bank order and, with ``orders > 1``,
in further seeded permutations; accuracy and samples are averaged over the orders per question,
and bootstrap CIs resample questions. A question without truth (no gold, no per-sample
``correct``) is scored by agreement with its full-budget majority.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from ...core.stats import bootstrap_means, percentile_ci
from .aggregate import answer_statics
from .banks import NULL, Bank, BankQuestion
from .features import PrefixTable, replay_table
from .rules import Method


@dataclass
class Result:
    method: str
    family: str
    param: float
    n_used: np.ndarray  # [Q] samples used, averaged over the replayed orders
    correct: np.ndarray  # [Q] share of the replayed orders answered correctly

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())

    @property
    def mean_samples(self) -> float:
        return float(self.n_used.mean())

    def row(self) -> ResultRow:
        return ResultRow(self.method, round(self.accuracy, 6), round(self.mean_samples, 4), len(self.correct))


class ResultRow(msgspec.Struct, omit_defaults=True):
    """One method's line in ``eval stop`` and the reports: rounded figures, with the bootstrap
    CIs when they were asked for (``result_rows``)."""

    method: str
    accuracy: float
    mean_samples: float
    questions: int
    accuracy_ci95: list[float] | None = None
    mean_samples_ci95: list[float] | None = None


class MethodCI(msgspec.Struct):
    """Bootstrap 95% intervals of a method's accuracy and mean samples (or of a paired difference)."""

    accuracy: tuple[float, float]
    mean_samples: tuple[float, float]


Replays = list[list[PrefixTable]]  # [question][order]


def tables(bank: Bank, budget: int, orders: int = 1, seed: int = 0, reference: Bank | None = None) -> Replays:
    """Prefix tables of the first ``budget`` samples of every question in ``orders`` orders:
    order 0 is bank order, the others are seeded permutations (the samples are i.i.d. draws, so
    every order is an equally likely history; averaging over orders removes the luck of one).
    ``reference``: the split whose samples give the answer priors (``answer_statics``)."""
    rng = np.random.default_rng(seed)
    out = []
    for q, st in zip(bank.questions, answer_statics(bank, reference), strict=True):
        row = []
        for r in range(orders):
            order = np.arange(budget) if r == 0 else rng.permutation(len(q.answers))[:budget]
            row.append(replay_table(q, order, st))
        out.append(row)
    return out


def _correct(q: BankQuestion, pt: PrefixTable, a: int) -> bool:
    """Whether local answer id ``a`` of a replay is right (or, without truth, agrees with the
    full-budget majority)."""
    if a == NULL:
        return False
    if q.has_truth:
        return q.is_correct(int(pt.ids[a])) if pt.ids is not None else q.is_correct(a)
    return a == int(pt.majority[-1])


def _collect(
    bank: Bank, reps: Replays, out: Callable[[PrefixTable], tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray]:
    n = np.zeros((len(reps), len(reps[0]) if reps else 0))
    c = np.zeros_like(n)
    for i, (q, row) in enumerate(zip(bank.questions, reps, strict=True)):
        for r, pt in enumerate(row):
            k, a = out(pt)
            n[i, r], c[i, r] = k, _correct(q, pt, a)
    return n.mean(axis=1), c.mean(axis=1)


def run_rule(bank: Bank, reps: Replays, method: Method, budget: int) -> Result:
    """A stopping rule; the answer is the majority (or ``method.answer``) at the stop."""

    def out(pt: PrefixTable) -> tuple[int, int]:
        k = method.rule(pt, budget)
        return k, int(pt.majority[k - 1]) if method.answer is None else method.answer(pt, k)

    n, c = _collect(bank, reps, out)
    return Result(method.name, method.family, method.param, n, c)


def run_stopper(
    bank: Bank,
    reps: Replays,
    name: str,
    family: str,
    param: float,
    fn: Callable[[PrefixTable], tuple[int, int]],
) -> Result:
    """A method that picks its own answer (e.g. Bayes MAP): fn(pt) -> (n_used, answer id)."""
    n, c = _collect(bank, reps, fn)
    return Result(name, family, param, n, c)


def run_methods(bank: Bank, methods: Sequence[Method], budget: int, orders: int = 1) -> list[Result]:
    reps = tables(bank, budget, orders)
    return [run_rule(bank, reps, m, budget) for m in methods]


def bootstrap_ci(res: Result, n_boot: int = 1000, seed: int = 0, level: float = 0.95) -> MethodCI:
    """Percentile bootstrap over questions for accuracy and mean samples."""
    acc, ns = bootstrap_means([res.correct, res.n_used], n_boot, seed)
    return MethodCI(percentile_ci(acc, level), percentile_ci(ns, level))


def paired_diff_ci(a: Result, b: Result, n_boot: int = 1000, seed: int = 0) -> MethodCI:
    """Bootstrap CI of (a - b) on the same questions, for accuracy and mean samples."""
    acc_a, acc_b, n_a, n_b = bootstrap_means([a.correct, b.correct, a.n_used, b.n_used], n_boot, seed)
    return MethodCI(percentile_ci(acc_a - acc_b), percentile_ci(n_a - n_b))


def paired_reward_ratio_ci(
    a: Result, b: Result, cost: float, n_boot: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """Bootstrap CI of reward(a) / reward(b) on the same questions (ratio of mean rewards,
    reward = correct - cost * samples)."""
    ra, rb = bootstrap_means([a.correct - cost * a.n_used, b.correct - cost * b.n_used], n_boot, seed)
    return percentile_ci(ra / rb)


def accuracy_at(front: Sequence[tuple[float, float]], samples: float) -> float:
    """Best accuracy a curve reaches with at most ``samples`` mean samples (-inf if none)."""
    vals = [a for s, a in front if s <= samples + 1e-9]
    return max(vals) if vals else float("-inf")


def dominates(
    front_a: Sequence[tuple[float, float]], front_b: Sequence[tuple[float, float]], tol: float = 0.0
) -> bool:
    """True if every point of ``front_b`` is matched (accuracy within tol) by ``front_a`` at no
    more samples."""
    return all(accuracy_at(front_a, s) >= a - tol for s, a in front_b)


def result_rows(results: Sequence[Result], n_boot: int = 1000, seed: int = 0) -> list[ResultRow]:
    """Every result's row with its bootstrap CIs (``n_boot`` resamples of the questions)."""
    out = []
    for r in results:
        row = r.row()
        ci = bootstrap_ci(r, n_boot=n_boot, seed=seed)
        row.accuracy_ci95 = [round(x, 4) for x in ci.accuracy]
        row.mean_samples_ci95 = [round(x, 3) for x in ci.mean_samples]
        out.append(row)
    return out
