"""Evaluation of stopping methods on a bank: accuracy, mean samples, bootstrap CIs, Pareto fronts.

Samples are replayed in bank order, so every method sees the same draws. A question without
truth (no gold, no per-sample ``correct``) is scored by agreement with its full-budget majority.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .banks import NULL, Bank
from .baselines import Method
from .features import PrefixTable, prefix_table


@dataclass
class Result:
    method: str
    family: str
    param: float
    n_used: np.ndarray  # [Q]
    correct: np.ndarray  # [Q] bool

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())

    @property
    def mean_samples(self) -> float:
        return float(self.n_used.mean())

    def row(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "accuracy": round(self.accuracy, 6),
            "mean_samples": round(self.mean_samples, 4),
            "questions": len(self.correct),
        }


def tables(bank: Bank, budget: int) -> list[PrefixTable]:
    """Prefix tables of the first ``budget`` samples of every question, in bank order."""
    out = []
    for q in bank.questions:
        cost = np.array(q.cost[:budget]) if q.cost is not None else None
        out.append(prefix_table(q.answers[:budget], cost))
    return out


def score(
    bank: Bank, pts: Sequence[PrefixTable], n_used: np.ndarray, answers: np.ndarray | None = None
) -> np.ndarray:
    """Correctness of the majority of the first n samples (or of given answer ids)."""
    out = np.zeros(len(pts), dtype=bool)
    for i, (q, pt) in enumerate(zip(bank.questions, pts, strict=True)):
        a = int(pt.majority[n_used[i] - 1]) if answers is None else int(answers[i])
        if q.has_truth:
            out[i] = q.is_correct(a)
        else:
            out[i] = a != NULL and a == int(pt.majority[-1])
    return out


def run_rule(bank: Bank, pts: Sequence[PrefixTable], method: Method, budget: int) -> Result:
    n = np.array([method.rule(pt, budget) for pt in pts], dtype=np.int64)
    return Result(method.name, method.family, method.param, n, score(bank, pts, n))


def run_stopper(
    bank: Bank,
    pts: Sequence[PrefixTable],
    name: str,
    family: str,
    param: float,
    fn: Callable[[PrefixTable], tuple[int, int]],
) -> Result:
    """A method that picks its own answer (e.g. Bayes MAP): fn(pt) -> (n_used, answer id)."""
    out = [fn(pt) for pt in pts]
    n = np.array([o[0] for o in out], dtype=np.int64)
    a = np.array([o[1] for o in out], dtype=np.int64)
    return Result(name, family, param, n, score(bank, pts, n, a))


def run_methods(bank: Bank, methods: Sequence[Method], budget: int) -> list[Result]:
    pts = tables(bank, budget)
    return [run_rule(bank, pts, m, budget) for m in methods]


def bootstrap_ci(
    res: Result, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap over questions for accuracy and mean samples."""
    rng = np.random.default_rng(seed)
    q = len(res.correct)
    idx = rng.integers(0, q, size=(n_boot, q))
    acc = res.correct[idx].mean(axis=1)
    ns = res.n_used[idx].mean(axis=1)
    lo, hi = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    return {
        "accuracy": (float(np.percentile(acc, lo)), float(np.percentile(acc, hi))),
        "mean_samples": (float(np.percentile(ns, lo)), float(np.percentile(ns, hi))),
    }


def paired_diff_ci(a: Result, b: Result, n_boot: int = 1000, seed: int = 0) -> dict[str, tuple[float, float]]:
    """Bootstrap CI of (a - b) on the same questions, for accuracy and mean samples."""
    rng = np.random.default_rng(seed)
    q = len(a.correct)
    idx = rng.integers(0, q, size=(n_boot, q))
    dacc = a.correct[idx].mean(1) - b.correct[idx].mean(1)
    dn = a.n_used[idx].mean(1) - b.n_used[idx].mean(1)
    return {
        "accuracy": (float(np.percentile(dacc, 2.5)), float(np.percentile(dacc, 97.5))),
        "mean_samples": (float(np.percentile(dn, 2.5)), float(np.percentile(dn, 97.5))),
    }


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Non-dominated (mean_samples, accuracy) points, sorted by samples (fewer and better wins)."""
    best: list[tuple[float, float]] = []
    for s, a in sorted(points, key=lambda p: (p[0], -p[1])):
        if not best or a > best[-1][1]:
            best.append((s, a))
    return best


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


def results_json(results: Sequence[Result], n_boot: int = 1000, seed: int = 0) -> list[dict[str, Any]]:
    out = []
    for r in results:
        row = r.row()
        ci = bootstrap_ci(r, n_boot=n_boot, seed=seed)
        row["accuracy_ci95"] = [round(x, 4) for x in ci["accuracy"]]
        row["mean_samples_ci95"] = [round(x, 3) for x in ci["mean_samples"]]
        out.append(row)
    return out
