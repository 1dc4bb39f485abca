"""The learned-stopping job end to end: train on some banks, evaluate on a held-out family.

``train_stop`` trains the main policy at one cost and a sweep of costs (its Pareto curve),
evaluates everything on held-out questions against every baseline and writes a report
directory. ``eval_stop`` evaluates baselines (and optionally a policy) on one bank.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict
from functools import partial
from typing import Any

import numpy as np

from ..core.errors import OrchestraceError
from .aggregate import Aggregator, fit_aggregator
from .banks import Bank, calibrate, default_bank, load_bank
from .baselines import Method, default_methods, sweep_methods
from .evaluate import Result, bootstrap_ci, pareto_front, results_json, run_rule, run_stopper, tables
from .features import PrefixTable, feature_names, features
from .policy import PolicyConfig, StopPolicy

ALGORITHMS = ("exact", "reinforce", "ppo", "grpo")
DEFAULT_COST = 0.003
SWEEP_COSTS = (0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.004, 0.005, 0.01, 0.02)
EVAL_ORDERS = 8  # each held-out question replayed in 8 orders (bank order + 7 seeded permutations)


def policy_rule(policy: StopPolicy, threshold: float | None = None) -> Callable[[PrefixTable, int], int]:
    """A learned policy as a stopping rule on replayed samples (numpy only)."""
    from .envs.stopvote import decision_points

    agg = policy.aggregator

    def rule(pt: PrefixTable, budget: int) -> int:
        pts = decision_points(min(budget, pt.length))
        f = features(pt, budget, aggregator=agg)[pts - 1]
        stop = policy.stops(f, threshold)
        stop[-1] = True
        return int(pts[int(np.argmax(stop))])

    return rule


def aggregator_answer(agg: Aggregator) -> Callable[[PrefixTable, int], int]:
    """The learned aggregator's answer after the first n samples of a replay."""

    def answer(pt: PrefixTable, n: int) -> int:
        assert pt.static is not None
        return int(agg.answers(pt.counts[n - 1 : n], pt.valid[n - 1 : n], pt.static)[0])

    return answer


def policy_method(policy: StopPolicy, name: str = "learned", threshold: float | None = None) -> Method:
    agg = policy.aggregator
    family = "learned" if agg is None else "learned+agg"
    return Method(
        name,
        family,
        policy.config.cost,
        policy_rule(policy, threshold),
        None if agg is None else aggregator_answer(agg),
    )


def load_banks(paths: Sequence[str] | None) -> list[Bank]:
    return [load_bank(p) for p in paths] if paths else [default_bank("antonyms")]


def split(bank: Bank, frac: float, seed: int) -> tuple[Bank, Bank]:
    """Held-out questions: a seeded split into (train, test)."""
    idx = np.random.default_rng(seed).permutation(len(bank))
    k = int(round(len(bank) * frac))
    return bank.subset(sorted(idx[:k]), bank.name + "-train"), bank.subset(
        sorted(idx[k:]), bank.name + "-test"
    )


def merge(banks: Sequence[Bank], name: str) -> Bank:
    return Bank(name, [q for b in banks for q in b.questions], {"parts": [b.name for b in banks]})


def train_policy(
    bank: Bank,
    cost: float,
    *,
    algo: str = "exact",
    budget: int = 40,
    seed: int = 0,
    iterations: int | None = None,
    perms: int = 16,
    progress: Callable[[int], None] | None = None,
    pool: Any = None,
    aggregator: Aggregator | None = None,
) -> tuple[StopPolicy, list[dict[str, float]]]:
    """Train one policy with one algorithm (module ``learn.algos.<algo>``); with an
    ``aggregator`` the policy also sees its features and is rewarded for its answers."""
    from importlib import import_module

    from .envs.stopvote import build_pool

    if algo not in ALGORITHMS:
        raise OrchestraceError("OT630", f"unknown algorithm {algo!r}; known: {', '.join(ALGORITHMS)}")
    mod = import_module(f"orchestrace.learn.algos.{algo}")
    if pool is not None:
        aggregator = pool.aggregator
    pool = pool or build_pool(bank, budget, perms, seed, aggregator=aggregator)
    args = mod.Args(seed=seed)
    if iterations is not None:
        args.iterations = iterations
    cfg = PolicyConfig(
        features=feature_names(aggregator is not None),
        budget=budget,
        cost=cost,
        trained_on=[bank.name],
        aggregator=None if aggregator is None else list(aggregator.weights),
    )
    res = mod.train(pool, cost, args, cfg, progress)
    return res.policy, res.history


def eval_methods(
    bank: Bank,
    budget: int,
    policies: Sequence[tuple[str, StopPolicy]] = (),
    sweeps: bool = False,
    bayes: bool = False,
    map_fn: Callable[[Callable[[Method], Result], list[Method]], Iterable[Result]] = map,
    orders: int = 1,
    seed: int = 0,
) -> list[Result]:
    """Every baseline at its published setting (and its sweep), the learned policies, and
    optionally the Bayes-optimal rule of a synthetic model calibrated to the bank, each on
    every question replayed in ``orders`` orders (bank order first).

    ``map_fn`` runs the methods (the CLI passes a Ray map for ``--ray``); results keep their order.
    """
    pts = tables(bank, budget, orders, seed)
    methods = default_methods(budget) + (sweep_methods() if sweeps else [])
    methods += [policy_method(p, name) for name, p in policies]
    out = list(map_fn(partial(_run_method, bank=bank, pts=pts, budget=budget), methods))
    if bayes:
        from .bayes import BayesStopper

        for _name, pol in policies or [("", None)]:
            c = pol.config.cost if pol is not None else DEFAULT_COST
            bs = BayesStopper(calibrate(bank), c, budget)
            out.append(run_stopper(bank, pts, f"bayes-optimal(c={c:g})", "bayes", c, bs.run))
    return out


def _run_method(m: Method, *, bank: Bank, pts: Any, budget: int) -> Result:
    return run_rule(bank, pts, m, budget)


def eval_stop(
    bank_path: str,
    policy_path: str | None = None,
    budget: int = 40,
    bayes: bool = False,
    map_fn: Callable[[Callable[[Method], Result], list[Method]], Iterable[Result]] = map,
    orders: int = 1,
) -> list[Result]:
    bank = load_bank(bank_path)
    if bank.min_samples < budget:
        raise OrchestraceError(
            "OT612",
            f"bank has questions with {bank.min_samples} samples, fewer than --budget {budget}",
            path=bank_path,
        )
    pols = [("learned", StopPolicy.load(policy_path))] if policy_path else []
    return eval_methods(bank, budget, pols, bayes=bayes, map_fn=map_fn, orders=orders)


def summarize_goal(results: Sequence[Result], learned: str = "learned") -> dict[str, Any]:
    """The issue's goal figures: learned vs fixed-40 and vs the hindsight oracle."""
    by = {r.method: r for r in results}
    full = by.get("fixed-40") or max((r for r in results if r.family == "fixed-k"), key=lambda r: r.param)
    ours = by[learned]
    oracle = by["hindsight-oracle"]
    return {
        "fixed_full_accuracy": full.accuracy,
        "learned_accuracy": ours.accuracy,
        "accuracy_gap_points": 100 * (ours.accuracy - full.accuracy),
        "learned_mean_samples": ours.mean_samples,
        "sample_reduction_x": full.mean_samples / ours.mean_samples,
        "oracle_mean_samples": oracle.mean_samples,
        "oracle_reduction_x": full.mean_samples / oracle.mean_samples,
        "gap_to_oracle_samples": ours.mean_samples - oracle.mean_samples,
    }


def fronts(results: Sequence[Result]) -> dict[str, list[tuple[float, float]]]:
    fam: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        fam.setdefault(r.family, []).append((r.mean_samples, r.accuracy))
    return {k: pareto_front(v) for k, v in fam.items()}


def _train_at_cost(
    c: float,
    *,
    train_bank: Bank,
    algo: str,
    budget: int,
    seed: int,
    iterations: int | None,
    pool: Any,
    progress: Any = None,
) -> tuple[StopPolicy, list[dict[str, float]]]:
    return train_policy(
        train_bank,
        c,
        algo=algo,
        budget=budget,
        seed=seed,
        iterations=iterations,
        pool=pool,
        progress=progress,
    )


def train_stop(
    bank_paths: Sequence[str] | None = None,
    eval_path: str | None = None,
    *,
    out: str = "runs/stop/policy",
    report_dir: str | None = None,
    cost: float = DEFAULT_COST,
    sweep_costs: Sequence[float] = SWEEP_COSTS,
    algo: str = "exact",
    budget: int = 40,
    seed: int = 0,
    iterations: int | None = None,
    progress: Callable[[str, int, int], Callable[[int], None]] | None = None,
    map_fn: Callable[[Callable[[float], Any], list[float]], Iterable[Any]] | None = None,
    aggregate: bool = True,
    orders: int = EVAL_ORDERS,
) -> dict[str, Any]:
    """Train on ``bank_paths`` (default: the embedded antonyms bank), evaluate on ``eval_path``
    (default: the embedded countries bank when training on the default; else a held-out 30% of
    the training questions), write the policy and a report. Returns the report dict.

    Two policy families are trained over the same costs: ``learned`` stops and answers by
    majority vote (pure O5, comparable with every published rule), ``learned+agg`` stops and
    answers with an aggregator fitted on the training banks (O5 + O4). The policies of the cost
    sweep are independent; ``map_fn`` (a Ray map from the CLI's ``--ray``) trains them in
    parallel, with the same seeds and so the same policies."""
    from .envs.stopvote import build_pool
    from .report import write_report

    t0 = time.time()
    train_banks = load_banks(bank_paths)
    for b in train_banks:
        if b.min_samples < budget:
            raise OrchestraceError("OT612", f"bank {b.name!r} has questions with fewer than {budget} samples")
    if eval_path is not None:
        train_bank, test_bank = (
            merge(train_banks, "+".join(b.name for b in train_banks)),
            load_bank(eval_path),
        )
    elif not bank_paths:
        train_bank, test_bank = train_banks[0], default_bank("countries")
    else:
        parts = [split(b, 0.7, seed) for b in train_banks]
        train_bank = merge([p[0] for p in parts], "+".join(b.name for b in train_banks) + "-train")
        test_bank = merge([p[1] for p in parts], "+".join(b.name for b in train_banks) + "-heldout")
    costs = [cost, *[c for c in sweep_costs if c != cost]]
    agg = fit_aggregator([train_bank], budget, seed=seed) if aggregate else None
    policies: list[tuple[str, StopPolicy]] = []
    curves: dict[str, list[dict[str, float]]] = {}
    for prefix, aggregator in [("learned", None)] + ([("learned+agg", agg)] if agg else []):
        pool = build_pool(train_bank, budget, 16, seed, aggregator=aggregator)
        common = dict(
            train_bank=train_bank, algo=algo, budget=budget, seed=seed, iterations=iterations, pool=pool
        )
        if map_fn is None:
            bar = (
                (lambda c, p=prefix: progress(f"{p} {algo} c={c:g}", 0, 0)) if progress else (lambda c: None)
            )
            trained = [_train_at_cost(c, progress=bar(c), **common) for c in costs]
        else:
            trained = list(map_fn(partial(_train_at_cost, **common), costs))
        for c, (pol, hist) in zip(costs, trained, strict=True):
            name = prefix if c == cost else f"{prefix}(c={c:g})"
            pol.config.trained_on = [b.name for b in train_banks]
            policies.append((name, pol))
            curves[name] = hist
    main = policies[0][1]
    main.save(out)
    if agg is not None:
        policies[len(costs)][1].save(out.removesuffix(".safetensors") + "-agg")
    results = eval_methods(test_bank, budget, policies, sweeps=True, orders=orders, seed=seed)
    train_time = time.time() - t0
    report = {
        "train_banks": [b.name for b in train_banks],
        "train_questions": len(train_bank),
        "eval_bank": test_bank.name,
        "eval_questions": len(test_bank),
        "algorithm": algo,
        "cost": cost,
        "sweep_costs": list(costs),
        "budget": budget,
        "seed": seed,
        "bootstrap": {"resamples": 1000, "seed": seed, "level": 0.95},
        "policy": out.removesuffix(".safetensors") + ".safetensors",
        "policy_config": asdict(main.config),
        "eval_orders": orders,
        "aggregator": None if agg is None else agg.to_dict(),
        "goal": summarize_goal(results),
        "goal_with_aggregator": summarize_goal(results, "learned+agg") if agg else None,
        "learned_ci95": bootstrap_ci(next(r for r in results if r.method == "learned"), seed=seed),
        "results": results_json(results, seed=seed),
        "pareto": {k: [list(p) for p in v] for k, v in fronts(results).items()},
        "learning_curves": curves,
        "seconds": round(train_time, 1),
    }
    rdir = report_dir or os.path.join(os.path.dirname(out) or ".", "report")
    write_report(report, rdir)
    report["report_dir"] = rdir
    with open(os.path.join(rdir, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    return report
