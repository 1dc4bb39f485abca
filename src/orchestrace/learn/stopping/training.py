"""The learned-stopping job end to end: train on some banks, evaluate on a held-out family.

``train_stop`` trains the main policy at one cost and a sweep of costs (its Pareto curve),
evaluates everything on held-out questions against every baseline and writes a report
directory. ``eval_stop`` evaluates baselines (and optionally a policy) on one bank.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from ...core.errors import OrchestraceError
from ...core.outputs import Place, claim_outputs, record_outputs, remove_files
from ...core.stats import pareto_front
from ..rl import algorithm, check_target_kl
from ..scalar_log import check_log, open_log, prepare_log
from .aggregate import Aggregator, answer_prior, fit_aggregator, priors_to_json, save_aggregator
from .banks import Bank, calibrate, load_bank
from .evaluation import (
    Replays,
    Result,
    accuracy_at,
    bootstrap_ci,
    paired_diff_ci,
    result_rows,
    run_rule,
    run_stopper,
    tables,
)
from .features import PrefixTable, feature_names, replay_features
from .policy import PolicyConfig, StopPolicy
from .report import REPORT_FILES, BootstrapSettings, GoalFigures, StopReport, write_report, write_report_json
from .rules import Method, confidence_answer, default_methods, sweep_methods

DEFAULT_COST = 0.003
SWEEP_COSTS = (0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.004, 0.005, 0.01, 0.02, 0.03)
EVAL_ORDERS = 8  # each held-out question replayed in 8 orders (bank order + 7 seeded permutations)


def policy_rule(policy: StopPolicy, threshold: float | None = None) -> Callable[[PrefixTable, int], int]:
    """A learned policy as a stopping rule on replayed samples (numpy only). A mixture draws, per
    replay, which of its two policies runs (a generator seeded with ``config.seed``, so the same
    sequence of replays gets the same draws)."""
    main = _single_rule(policy, threshold)
    if policy.alt is None:
        return main
    alt = _single_rule(policy.alt, threshold)
    assert policy.config.mixture is not None  # StopPolicy holds both or neither
    prob = policy.config.mixture["prob"]
    rng = np.random.default_rng(policy.config.seed)

    def rule(pt: PrefixTable, budget: int) -> int:
        return (alt if rng.random() < prob else main)(pt, budget)

    return rule


def _single_rule(policy: StopPolicy, threshold: float | None) -> Callable[[PrefixTable, int], int]:
    from .pool import decision_points

    agg, confidence = policy.aggregator, policy.confidence

    def rule(pt: PrefixTable, budget: int) -> int:
        pts = decision_points(min(budget, pt.length))
        f = replay_features(pt, budget, agg, confidence)[pts - 1]
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
    answer = None if agg is None else aggregator_answer(agg)
    if policy.config.answer == "confidence":
        answer = confidence_answer("mean")
    return Method(name, family, policy.config.cost, policy_rule(policy, threshold), answer)


def require_logprobs(bank: Bank, who: str, path: str | None = None) -> None:
    """OT624 unless every question of ``bank`` has its samples' token log-probabilities."""
    if any(q.logprob is None for q in bank.questions):
        raise OrchestraceError("OT624", f"{who} reads token log-probabilities, and bank {bank.name!r} has "
                               "questions without them (build it with bank build --logprobs)", path=path)  # fmt: skip


def split(bank: Bank, frac: float, seed: int, names: tuple[str, str] | None = None) -> tuple[Bank, Bank]:
    """Held-out questions: a seeded split into (train, test), named ``names`` (default: the bank's
    name + ``-train`` / ``-test``)."""
    idx = np.random.default_rng(seed).permutation(len(bank))
    k = int(round(len(bank) * frac))
    first, second = names or (bank.name + "-train", bank.name + "-test")
    return bank.subset(sorted(idx[:k]), first), bank.subset(sorted(idx[k:]), second)


def merge(banks: Sequence[Bank], name: str) -> Bank:
    """One bank of several families; ``part_of`` keeps each question's family (answer statistics
    are per family, ``aggregate.answer_statics``)."""
    part_of = [k for k, b in enumerate(banks) for _ in b.questions]
    return Bank(
        name, [q for b in banks for q in b.questions], {"parts": [b.name for b in banks], "part_of": part_of}
    )


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
    confidence: bool = False,
    weighted: bool = False,
    log: str | None = None,
    log_out: str | Path = ".",
    target_kl: float | None = None,
) -> tuple[StopPolicy, list[dict[str, float]]]:
    """Train one policy with one algorithm (module ``learn.rl.<algo>``); with an
    ``aggregator`` the policy also sees its features and is rewarded for its answers; with
    ``confidence`` it also sees the token-confidence features (a bank with log-probabilities), with
    ``weighted`` it answers (and is rewarded for) the confidence-weighted leader. ``log``
    (``tensorboard`` or ``mlflow``): every iteration's figures under ``log_out/<log>``, in the run
    ``<learned or learned+agg>-c=<cost>`` (opened here, so a Ray worker writes its own). ``target_kl`` (ppo, grpo): no further epoch of an
    update once its approximate KL passed this."""
    from .pool import build_pool
    from .task import PoolTask

    mod = algorithm(algo)
    if pool is not None:
        aggregator, confidence, weighted = pool.aggregator, pool.confidence, pool.weighted
    pool = pool or build_pool(
        bank, budget, perms, seed, aggregator=aggregator, confidence=confidence, weighted=weighted
    )
    args = mod.Args(seed=seed)
    if iterations is not None:
        args.iterations = iterations
    check_target_kl(target_kl, algo)
    if target_kl is not None:
        args.target_kl = target_kl
    cfg = PolicyConfig(
        features=feature_names(aggregator is not None, confidence),
        feature_set="counts+confidence" if confidence else "counts",
        answer="confidence" if weighted else "majority",
        budget=budget,
        cost=cost,
        trained_on=[bank.name],
        aggregator=None if aggregator is None else list(aggregator.weights),
    )
    name = f"{'learned' if aggregator is None else 'learned+agg'}-c={cost:g}"
    with open_log(log, log_out, run=name):
        res = mod.train(PoolTask(pool, cost, cfg), args, progress)
    return res.policy, res.history


def mean_samples(policy: StopPolicy, reps: Replays, budget: int) -> float:
    """Mean samples a policy draws on replayed questions: needs their samples, never their labels."""
    return float(_samples_each(policy, reps, budget).mean())


def _samples_each(policy: StopPolicy, reps: Replays, budget: int) -> np.ndarray:
    rule = policy_rule(policy)
    return np.array([rule(pt, budget) for row in reps for pt in row], float)


def mixture_prob(over: np.ndarray, under: np.ndarray, target: float, seed: int) -> float:
    """The largest share p of replays on which the overspending policy may run (samples ``over``
    per replay) instead of the one within budget (``under``) so that the mean stays <= ``target``,
    with the draws ``policy_rule`` makes (uniforms from ``default_rng(seed)``, one per replay)."""
    draws = np.random.default_rng(seed).random(len(over))
    order = np.argsort(draws)
    u = draws[order]
    # with share p, exactly the replays whose draw is below p switch: mean after the j lowest
    means = (under.sum() + np.concatenate([[0.0], np.cumsum((over - under)[order])])) / len(over)
    j = int(np.flatnonzero(means <= target + 1e-9).max())
    if j == 0:
        return 0.0
    return 1.0 if j == len(u) else float((u[j - 1] + u[j]) / 2)


def calibrate_cost(
    train_bank: Bank,
    unlabelled: Bank,
    target: float,
    *,
    pool: Any,
    budget: int = 40,
    seed: int = 0,
    algo: str = "exact",
    iterations: int | None = None,
    bounds: tuple[float, float] = (1e-4, 0.05),
    steps: int = 8,
    orders: int = 16,
    mix: bool = True,
    progress: Callable[[float], Callable[[int], None] | None] | None = None,
    target_kl: float | None = None,
) -> tuple[StopPolicy, float, float]:
    """The policy for a sample budget: maximise accuracy subject to mean samples <= ``target``.

    The cost c is the Lagrange multiplier of that constraint, so a bisection on c (log scale) finds
    the smallest c whose trained policy keeps the budget on ``unlabelled`` questions (their samples
    replayed in ``orders`` seeded orders; labels are never read). The mean samples of trained
    policies jumps as c crosses the multiplier, so with ``mix`` the answer is the constrained
    optimum's randomised form: the policy at that c, replaced on a share of questions by the
    policy at the largest c that overspends, the share spending the budget exactly
    (``mixture_prob``). Returns (policy, c, its mean samples there); if even the top of
    ``bounds`` overspends, the policy at that cost. ``progress(c)`` may return a per-iteration
    callback for the training at cost c; ``target_kl`` goes to :func:`train_policy`."""
    reps = tables(unlabelled, budget, orders, seed + 1)
    lo, hi = np.log(bounds[0]), np.log(bounds[1])
    common: dict[str, Any] = dict(
        algo=algo, budget=budget, seed=seed, iterations=iterations, pool=pool, target_kl=target_kl
    )

    def fit(c: float) -> tuple[StopPolicy, float, np.ndarray]:
        pol, _ = train_policy(train_bank, c, progress=progress(c) if progress else None, **common)
        return pol, c, _samples_each(pol, reps, budget)

    best = over = None
    for _ in range(steps):
        got = fit(float(np.exp((lo + hi) / 2)))
        if got[2].mean() <= target:
            hi, best = np.log(got[1]), got
        else:
            lo, over = np.log(got[1]), got
    if best is None:
        best = fit(float(np.exp(hi)))
        if best[2].mean() > target:
            return best[0], best[1], float(best[2].mean())
    pol, c, used = best
    if mix and over is not None:
        prob = mixture_prob(over[2], used, target, pol.config.seed)
        if prob > 0:
            pol = pol.mixed_with(over[0], prob)
    return pol, c, mean_samples(pol, reps, budget)


def eval_methods(
    bank: Bank,
    budget: int,
    policies: Sequence[tuple[str, StopPolicy]] = (),
    sweeps: bool = False,
    bayes: bool = False,
    map_fn: Callable[[Callable[[Method], Result], list[Method]], Iterable[Result]] = map,
    orders: int = 1,
    seed: int = 0,
    reference: Bank | None = None,
) -> list[Result]:
    """Every baseline at its published setting (and its sweep), the learned policies, and
    optionally the Bayes-optimal rule of a synthetic model calibrated to the bank, each on
    every question replayed in ``orders`` orders (bank order first).

    ``map_fn`` runs the methods (the CLI passes a Ray map for ``--ray``); results keep their order.
    """
    pts = tables(bank, budget, orders, seed, reference)
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
    check_numbers(cost=0.0, budget=budget)  # --budget 0: an IndexError (exit 3)
    bank = load_bank(bank_path)
    if bank.min_samples < budget:
        raise OrchestraceError(
            "OT612",
            f"bank has questions with {bank.min_samples} samples, fewer than --budget {budget}",
            path=bank_path,
        )
    pols = [("learned", StopPolicy.load(policy_path))] if policy_path else []
    if pols and pols[0][1].confidence:
        require_logprobs(bank, "the policy's feature set (counts+confidence)", bank_path)
    return eval_methods(bank, budget, pols, bayes=bayes, map_fn=map_fn, orders=orders)


def summarize_goal(
    results: Sequence[Result], learned: str = "learned", reduction: float = 8.0
) -> GoalFigures:
    """The issue's goal figures: learned vs fixed-40 and vs the hindsight oracle, and the best
    accuracy of the policy family's Pareto front with ``reduction`` times fewer samples."""
    by = {r.method: r for r in results}
    full = by.get("fixed-40") or max((r for r in results if r.family == "fixed-k"), key=lambda r: r.param)
    ours = by[learned]
    oracle = by["hindsight-oracle"]
    front = pareto_front([(r.mean_samples, r.accuracy) for r in results if r.family == ours.family])
    at = accuracy_at(front, full.mean_samples / reduction)
    return GoalFigures(
        front_reduction_x=reduction,
        front_accuracy_at_reduction=None if at == float("-inf") else at,
        front_gap_points_at_reduction=None if at == float("-inf") else 100 * (at - full.accuracy),
        fixed_full_accuracy=full.accuracy,
        learned_accuracy=ours.accuracy,
        accuracy_gap_points=100 * (ours.accuracy - full.accuracy),
        accuracy_gap_ci95_points=[100 * x for x in paired_diff_ci(ours, full).accuracy],
        learned_mean_samples=ours.mean_samples,
        sample_reduction_x=full.mean_samples / ours.mean_samples,
        oracle_mean_samples=oracle.mean_samples,
        oracle_reduction_x=full.mean_samples / oracle.mean_samples,
        gap_to_oracle_samples=ours.mean_samples - oracle.mean_samples,
    )


def fronts(results: Sequence[Result]) -> dict[str, list[tuple[float, float]]]:
    fam: dict[str, list[tuple[float, float]]] = {}
    for r in results:
        fam.setdefault(r.family, []).append((r.mean_samples, r.accuracy))
    return {k: pareto_front(v) for k, v in fam.items()}


def check_numbers(
    *,
    cost: float,
    budget: int,
    sweep_costs: Sequence[float] = (),
    target_samples: float | None = None,
    iterations: int | None = None,
    lr: float | None = None,
) -> None:
    """OT631 before anything runs for a number training cannot use: a NaN cost was an internal
    error (KeyError) or NaN rewards, a budget below 2 divided by log(1) or indexed nothing, a NaN
    target an empty reduction, a negative cost or step or an iteration count below 1 trained on
    without a word."""

    def finite(x: float) -> bool:
        return isinstance(x, int | float) and not isinstance(x, bool) and np.isfinite(x)

    for name, x in (("--cost", cost), *(("--sweep", c) for c in sweep_costs)):
        if not (finite(x) and x >= 0):
            raise OrchestraceError(
                "OT631", f"{name} must be a finite number >= 0 (a price per sample), got {x}"
            )
    if budget < 2:
        raise OrchestraceError("OT631", f"--budget must be >= 2 samples, got {budget}")
    if target_samples is not None and not (finite(target_samples) and target_samples > 0):
        raise OrchestraceError("OT631", f"--target-samples must be a finite number > 0, got {target_samples}")
    if iterations is not None and iterations < 1:
        raise OrchestraceError("OT631", f"--iterations must be >= 1, got {iterations}")
    if lr is not None and not (finite(lr) and lr > 0):
        raise OrchestraceError("OT631", f"--lr must be a finite number > 0, got {lr}")


DEFAULT_TRAIN = ("antonyms", "countries", "continents", "capitals", "languages")
DEFAULT_EVAL = ("plurals", "comparatives")
TARGET_SAMPLES = 5.0  # the default sample budget: 8x fewer than fixed-40


def train_stop(
    bank_paths: Sequence[str] | None = None,
    eval_paths: Sequence[str] | None = None,
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
    target_samples: float | None = TARGET_SAMPLES,
    train_traces: Sequence[str] | None = None,
    eval_traces: Sequence[str] | None = None,
    confidence: bool = False,
    force: bool = False,
    log: str | None = None,
    target_kl: float | None = None,
) -> StopReport:
    """Train on ``bank_paths`` (default: five embedded families) or on the vote traces matching
    ``train_traces`` (globs; ``traces.bank_from_traces``), evaluate on ``eval_paths`` / ``eval_traces``
    (default: the embedded plurals and comparatives, families never trained on; with
    ``bank_paths`` alone, a held-out 30% of the training questions), write the policy and a
    report. Returns the report (``report.json``).

    Two policy families are trained over the same costs: ``learned`` stops and answers by
    majority vote (pure O5, comparable with every published rule), ``learned+agg`` stops and
    answers with an aggregator fitted on the training banks (O5 + O4). The policies of the cost
    sweep are independent; ``map_fn`` (a Ray map from the CLI's ``--ray``) trains them in
    parallel, with the same seeds and so the same policies. With ``target_samples`` each family
    also gets the policy for that sample budget (``calibrate_cost``, on the calibration half's
    samples, never their labels), saved next to the main one with a ``-target`` suffix. With
    ``confidence`` every policy also sees the token-confidence features (feature set
    ``counts+confidence``): every training and held-out question needs log-probabilities.

    The policies and the report belong to one run (``core.outputs``): ``out`` or the report folder
    holding another run's files is refused (OT632) before anything is trained, unless ``force``,
    which removes that run's files first; the same call again rewrites its own. ``log``:
    ``tensorboard`` or ``mlflow`` logs each policy of the cost sweep's iterations under
    ``<folder of out>/<log>``, one run per policy."""
    from .pool import build_pool
    from .traces import bank_from_traces

    if train_traces and bank_paths:
        raise OrchestraceError("OT631", "give training data as --bank or as --traces, not both")
    check_log(log)
    check_target_kl(target_kl, algo)
    check_numbers(
        cost=cost,
        budget=budget,
        sweep_costs=sweep_costs,
        target_samples=target_samples,
        iterations=iterations,
    )
    log_out = str(Path(out).parent)
    t0 = time.time()
    if train_traces:
        train_banks = [bank_from_traces(train_traces)]
    else:
        train_banks = [load_bank(p) for p in bank_paths or DEFAULT_TRAIN]
    for b in train_banks:
        if b.min_samples < budget:
            hint = (
                " (runs that stopped early, as a stop policy's do in loop stop: train on them as they "
                "happened with --logged)"
                if train_traces
                else ""
            )
            raise OrchestraceError(
                "OT612", f"bank {b.name!r} has questions with fewer than {budget} samples{hint}"
            )
    if eval_traces or eval_paths or not (bank_paths or train_traces):
        test_banks = (
            [bank_from_traces(eval_traces)]
            if eval_traces
            else [load_bank(p) for p in eval_paths or DEFAULT_EVAL]
        )
        train_bank = merge(train_banks, "+".join(b.name for b in train_banks))
    else:
        parts = [split(b, 0.7, seed) for b in train_banks]
        train_bank = merge([p[0] for p in parts], "+".join(b.name for b in train_banks) + "-train")
        test_banks = [p[1] for p in parts]
    if confidence:
        for b in [*train_banks, *test_banks]:
            require_logprobs(b, "--confidence")
    # after the inputs are read (their errors come first), before anything is trained
    base = out.removesuffix(".safetensors")
    rdir = report_dir or os.path.join(os.path.dirname(out) or ".", "report")
    run_inputs = {
        "bank": list(bank_paths or []), "eval_bank": list(eval_paths or []), "traces": list(train_traces or []),
        "eval_traces": list(eval_traces or []), "out": base, "report": rdir, "cost": cost,
        "sweep": list(sweep_costs), "algo": algo, "budget": budget, "seed": seed, "iterations": iterations,
        "aggregate": aggregate, "orders": orders, "target_samples": target_samples or None, "confidence": confidence,
    }  # fmt: skip
    places = output_places(base, rdir)
    replaced = claim_outputs("train stop", run_inputs, places, force=force)  # removed before the first write
    # no free samples: the budget calibration and the answer priors read a disjoint half of the
    # held-out questions (per family); accuracy and samples are reported on the other half only
    # both halves keep the held-out bank's name: a split held-out bank is already "<family>-test"
    halves = [split(b, 0.5, seed + 1, (b.name, b.name)) for b in test_banks]
    calib_bank, test_bank = (
        (halves[0][0], halves[0][1])
        if len(halves) == 1
        else tuple(merge([h[j] for h in halves], "+".join(b.name for b in test_banks)) for j in (0, 1))
    )
    costs = [cost, *[c for c in sweep_costs if c != cost]]
    agg = fit_aggregator([train_bank], budget, seed=seed) if aggregate else None
    policies: list[tuple[str, StopPolicy]] = []
    curves: dict[str, list[dict[str, float]]] = {}
    # per policy family, the calibration fields of its GoalFigures
    calibrations: dict[str, dict[str, float | bool | None]] = {}
    prepare_log(log, log_out)  # one store for the policies that Ray workers train at once
    for prefix, aggregator in [("learned", None)] + ([("learned+agg", agg)] if agg else []):
        pool = build_pool(train_bank, budget, 16, seed, aggregator=aggregator, confidence=confidence)
        common: dict[str, Any] = dict(
            algo=algo, budget=budget, seed=seed, iterations=iterations, pool=pool, target_kl=target_kl
        )
        if map_fn is None:
            bar = (
                (lambda c, p=prefix: progress(f"{p} {algo} c={c:g}", 0, 0)) if progress else (lambda c: None)
            )
            trained = [
                train_policy(train_bank, c, progress=bar(c), log=log, log_out=log_out, **common)
                for c in costs
            ]
        else:
            trained = list(
                map_fn(partial(train_policy, train_bank, log=log, log_out=log_out, **common), costs)
            )
        for c, (pol, hist) in zip(costs, trained, strict=True):
            name = prefix if c == cost else f"{prefix}(c={c:g})"
            pol.config.trained_on = [b.name for b in train_banks]
            policies.append((name, pol))
            curves[name] = hist
        if target_samples:
            pol, c, used = calibrate_cost(
                train_bank,
                calib_bank,
                target_samples,
                **common,
                progress=(
                    (lambda c, p=prefix: progress(f"{p} budget {target_samples:g}: c={c:.3g}", 0, 0))
                    if progress and map_fn is None
                    else None
                ),
            )
            pol.config.trained_on = [b.name for b in train_banks]
            mix = pol.config.mixture or {}
            calibrations[prefix] = {
                "cost": c,
                "calibration_mean_samples": used,
                "met": used <= target_samples,
                "mixture_prob": mix.get("prob", 0.0),
                "mixture_cost": mix.get("cost"),
            }
            policies.append((f"{prefix}(target={target_samples:g})", pol))
    remove_files(replaced)
    written: dict[str, str] = {}  # method name -> policy file, marked on pareto.png
    files: list[str] = []  # every file this job writes, in order, printed by the CLI
    # for live runs, the aggregator and the -agg policies carry the answer priors of the training
    # families and of the calibration halves (those offline evaluation reads; they win for a family
    # in both), never of the reported half
    priors = {}
    if agg is not None:
        priors = {b.meta.get("family") or b.name: answer_prior(b.questions) for b in train_banks}
        # keyed by the held-out bank's family, as a run's config names it (not the half's "-train" name)
        priors |= {
            b.meta.get("family") or b.name: answer_prior(h[0].questions)
            for b, h in zip(test_banks, halves, strict=True)
        }
    for name, pol in policies:
        if name in ("learned", "learned+agg") or "(target=" in name:
            suffix = "-agg" if pol.aggregator is not None else ""
            path = base + suffix + ("-target" if "(target=" in name else "")
            if pol.aggregator is not None:
                pol.config.extra["answer_priors"] = priors_to_json(priors)
            files += pol.save(path)
            written[name] = path + ".safetensors"
    if agg is not None:  # the aggregator alone, for live runs
        files += save_aggregator(base + "-aggregator", agg, priors)
    results = eval_methods(
        test_bank, budget, policies, sweeps=True, orders=orders, seed=seed, reference=calib_bank
    )
    train_time = time.time() - t0
    report = StopReport(
        train_banks=[b.name for b in train_banks],
        train_questions=len(train_bank),
        eval_bank=test_bank.name,
        eval_questions=len(test_bank),
        calibration_questions=len(calib_bank),
        protocol=(
            "budget calibration and answer priors on a disjoint calibration half of the held-out"
            " questions (its samples counted apart); accuracy and mean samples on the other half"
        ),
        algorithm=algo,
        cost=cost,
        sweep_costs=list(costs),
        budget=budget,
        seed=seed,
        bootstrap=BootstrapSettings(resamples=1000, seed=seed, level=0.95),
        policy=base + ".safetensors",
        policies_written=written,
        policy_config=policies[0][1].config,
        eval_orders=orders,
        aggregator=None if agg is None else agg.to_dict(),
        aggregator_file=None if agg is None else base + "-aggregator.safetensors",
        goal=summarize_goal(results),
        goal_with_aggregator=summarize_goal(results, "learned+agg") if agg else None,
        target_samples=target_samples or None,
        targets={
            k: msgspec.structs.replace(summarize_goal(results, f"{k}(target={target_samples:g})"), **v)
            for k, v in calibrations.items()
        },
        learned_ci95=bootstrap_ci(next(r for r in results if r.method == "learned"), seed=seed),
        results=result_rows(results, seed=seed),
        pareto={k: [list(p) for p in v] for k, v in fronts(results).items()},
        learning_curves=curves,
        seconds=round(train_time, 1),
        report_dir=rdir,
        files_written=[],
    )
    files += write_report(report, rdir)
    report_json = os.path.join(rdir, "report.json")
    report.files_written = [*files, report_json, *(p.record for p in places)]
    write_report_json(report, report_json)
    record_outputs("train stop", run_inputs, places, report.files_written)
    return report


#: the policy files a train stop run may write beside ``-o`` (any options), by suffix
POLICY_SUFFIXES = ("", "-agg", "-target", "-agg-target", "-aggregator")


def output_places(base: str, report_dir: str) -> list[Place]:
    """Where a train stop run writes (its policies at ``base``, its report folder), with every file
    a run may leave there, for ``core.outputs``."""
    policies = [base + s + ext for s in POLICY_SUFFIXES for ext in (".safetensors", ".json")]
    # also what `orchestrace report` draws there from this run's JSON: stale once the run is replaced
    drawn = ("report.html", "report_pareto.png", "report_learning_curves.png")
    report = [os.path.join(report_dir, f) for f in (*REPORT_FILES, "report.json", *drawn)]
    return [Place(base + ".run.json", policies), Place(os.path.join(report_dir, "run.json"), report)]
