"""The protocol of the RetryStop, Delegate and Swarm experiments: the seeded split, summaries, result files.

Protocol (all three): a seeded split into training and held-out items (tasks, queries, task
DAGs), training only sees the training split, every number in a result is measured on the held-out
split with a percentile bootstrap CI over items, and the seeds are part of the result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import msgspec
import numpy as np

from ...core.errors import BadInput, OrchestraceError
from ...core.paths import make_dirs
from ...core.stats import mean_ci
from ..rl import check_algorithm, check_target_kl
from ..rl.rollouts import NumpyPolicy

SPLIT_SEED = 0


@dataclass(frozen=True)
class Comparison:
    """The learned policy against one baseline on the same held-out items: the paired mean
    difference, its 95% CI, and ``verdict``: ``wins`` or ``loses`` (the CI excludes 0), ``tie``."""

    baseline: str
    mean: float
    lo: float
    hi: float
    verdict: str


class MeanCI(msgspec.Struct):
    """A mean over held-out items (or a paired mean difference) and its 95% bootstrap CI."""

    mean: float
    ci95: tuple[float, float]


#: An algorithm's hyperparameters (the keys depend on the algorithm); a result's ``algo`` adds its ``name``.
AlgoSettings = dict[str, str | int | float]


def comparisons(result: msgspec.Struct) -> list[Comparison]:
    """Every ``learned_minus_<baseline>`` field of a result that is set, in field order, with its
    verdict (ties included: a user must see where the learned policy does not beat a rule)."""
    out = []
    for key, d in msgspec.structs.asdict(result).items():
        if key.startswith("learned_minus_") and isinstance(d, MeanCI):
            base = key.removeprefix("learned_minus_").removesuffix("_r_perf")
            lo, hi = d.ci95
            verdict = "wins" if lo > 0 else "loses" if hi < 0 else "tie"
            out.append(Comparison(base, d.mean, lo, hi, verdict))
    return out


def split(n: int, frac: float = 0.6, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, held-out) index split."""
    idx = np.random.default_rng(seed).permutation(n)
    k = int(round(n * frac))
    return np.sort(idx[:k]), np.sort(idx[k:])


def summary(x: np.ndarray, seed: int) -> MeanCI:
    """The mean over held-out items (in their own dtype) and its bootstrap CI (``core.stats.mean_ci``)."""
    return MeanCI(float(np.mean(x)), mean_ci(x, seed=seed)[1])


def paired_summary(a: np.ndarray, b: np.ndarray, seed: int) -> MeanCI:
    """``learned - baseline`` on the same items, with its bootstrap CI."""
    return MeanCI(*mean_ci(np.asarray(a, float) - np.asarray(b, float), seed=seed))


def algo_kwargs(defaults: dict[str, AlgoSettings], algo: str, **given: float | None) -> AlgoSettings:
    """The env's default hyperparameters for ``algo`` (none listed: ``train_policy``'s), overridden by
    the ``given`` ones not None (a ``target_kl`` only for an algorithm with epochs to stop)."""
    check_algorithm(algo)
    check_target_kl(given.get("target_kl"), algo)
    return {**defaults.get(algo, {}), **{k: v for k, v in given.items() if v is not None}}


R = TypeVar("R", bound=msgspec.Struct)


@dataclass(frozen=True)
class Trained(Generic[R]):
    """What a training run returns: its result, the file name the result goes to, and the policies
    it trained by file stem (NAME.safetensors + NAME.json); :func:`write_trained` saves them."""

    result: R
    result_file: str
    policies: dict[str, NumpyPolicy]


def write_trained(out: str | Path, trained: Trained[R]) -> R:
    """Save the policies and the result JSON in OUT; the result returned (and written) lists
    every file in ``files_written`` (the policies, then the JSON itself) for the CLI to name."""
    d = make_dirs(out)
    files: list[str] = []
    for name, policy in trained.policies.items():
        st = policy.save(d / name)
        files += [str(st), str(st.with_suffix(".json"))]
    result = msgspec.structs.replace(trained.result, files_written=[*files, str(d / trained.result_file)])
    (d / trained.result_file).write_text(json.dumps(msgspec.to_builtins(result), indent=2) + "\n")
    return result


def need_numbers(**values: float | None) -> None:
    """OT665 for an option no run can use, before anything runs: a NaN or infinite cost, lambda or
    reward weight (numpy's "Probabilities contain NaN", exit 3), a negative one (trained on without
    a word), fewer than one iteration, evaluation task or branch (an empty table, or an IndexError).
    Names ending in ``_count`` are counts (>= 1), the others prices or weights (finite, >= 0); None
    is a default still to be chosen."""
    for name, v in values.items():
        if v is None:
            continue
        shown = f"--{name.removesuffix('_count').replace('_', '-')}"
        if name.endswith("_count"):
            if v < 1:
                raise OrchestraceError("OT665", f"{shown} must be >= 1, got {v}")
        elif isinstance(v, bool) or not (math.isfinite(v) and v >= 0):
            raise OrchestraceError("OT665", f"{shown} must be a finite number >= 0, got {v}")


def policy_number(policy: NumpyPolicy, key: str, default: float, path: str | Path) -> float:
    """``extra[key]`` a policy recorded (its training cost, lambda) as a finite number >= 0; a string
    there was an internal error (``float("abc")``), OT664 names the policy file."""
    v = policy.meta.extra.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v >= 0):
        raise BadInput(
            "OT664", f"the policy's {key} must be a finite number >= 0, got {v!r:.60}", path=str(path)
        )
    return float(v)


def need_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise OrchestraceError("OT665", f"unknown {name} {value!r} (one of {', '.join(allowed)})")
