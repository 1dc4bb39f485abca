"""Leave-one-family-out: train on every embedded family but one, evaluate on the one left out.

The protocol has no free samples: each held-out family is split in two halves of questions
(seeded); the label-free prior of the adapted Bayes rule (``adapt.fit_label_free``) reads the
calibration half's samples (counted apart, never their labels), and accuracy and mean samples
are reported on the other half, every method on the same replays. The learned policy reads
nothing of the held-out family at all; the adapted learned policy (``online.py``) reads only the
samples it drew itself on the reported questions before the current one. Each method is compared with fixed-budget voting (paired
bootstrap CI over the reported questions) and with every rule setting: a point is dominated when
some rule (fixed-k, an Adaptive-Consistency threshold, an ESC window, an SPRT setting, the
AC code's share and entropy thresholds) reaches at least its accuracy with at most its samples,
one of the two strictly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial

import numpy as np

from ...core.io import atomic_output
from .adapt import bayes_stoppers, fit_label_free
from .banks import Bank, SynthParams, default_bank, default_bank_names
from .evaluation import Result, paired_diff_ci, run_rule, run_stopper, tables
from .online import adaptive_pool, adaptive_stopper, run_online, train_adaptive
from .policy import StopPolicy
from .rules import Method, consol_sprt, default_methods, sweep_methods
from .training import DEFAULT_COST, check_numbers, merge, policy_method, policy_rule, split, train_policy

RULE_FAMILIES = ("fixed-k", "ac-beta", "ac-dirichlet", "esc", "consol-sprt", "majority-share", "entropy")
LEARNED_COSTS = (0.001, DEFAULT_COST, 0.01, 0.03)
BAYES_COSTS = (DEFAULT_COST, 0.01)
PROTOCOL = (
    "per held-out family: the adapted Bayes rule's prior from a calibration half of its questions"
    " (samples only, counted apart); accuracy and mean samples on the other half; the learned"
    " policy reads nothing of the held-out family; the online-adapted one refits its label-free prior"
    " on the samples it drew on the reported questions before the current one"
)


@dataclass
class MethodRow:
    """One method on one held-out family (or ``all``: the families' reported questions pooled)."""

    family: str
    method: str
    accuracy: float
    mean_samples: float
    fixed_accuracy: float  # fixed-budget majority vote on the same replays
    gap_points: float
    gap_ci95_points: tuple[float, float]  # paired bootstrap over the reported questions
    dominated_by: list[str]  # rule settings with no more samples and no lower accuracy


@dataclass
class FamilyTransfer:
    family: str
    reported_questions: int
    calibration_questions: int
    calibration_samples: int  # drawn for the label-free prior, on top of the reported ones
    label_free_prior: SynthParams
    oracle_mean_samples: float
    learned_front_dominated: int  # learned points (one per cost) that some rule dominates
    learned_front_points: int
    online_front_dominated: int  # the same for the online-adapted learned policy
    sprt_front_dominated: int  # the same for the learned policy stopping also where SPRT does


@dataclass
class TransferReport:
    protocol: str
    budget: int
    orders: int
    seed: int
    learned_costs: list[float]
    bayes_costs: list[float]
    families: list[FamilyTransfer] = field(default_factory=list)
    rows: list[MethodRow] = field(default_factory=list)


def dominating_rules(ours: Result, rules: Sequence[Result]) -> list[str]:
    """Rule settings that dominate ``ours``, most accurate first."""
    hits = [
        r
        for r in rules
        if r.mean_samples <= ours.mean_samples + 1e-9
        and r.accuracy >= ours.accuracy - 1e-9
        and (r.mean_samples < ours.mean_samples - 1e-9 or r.accuracy > ours.accuracy + 1e-9)
    ]
    hits.sort(key=lambda r: (-r.accuracy, r.mean_samples))
    return list(dict.fromkeys(r.method for r in hits))


def _row(family: str, ours: Result, full: Result, rules: Sequence[Result], seed: int) -> MethodRow:
    ci = paired_diff_ci(ours, full, seed=seed).accuracy
    return MethodRow(
        family,
        ours.method,
        ours.accuracy,
        ours.mean_samples,
        full.accuracy,
        100 * (ours.accuracy - full.accuracy),
        (100 * ci[0], 100 * ci[1]),
        dominating_rules(ours, rules),
    )


def _pool(results: Sequence[Result]) -> Result:
    r = results[0]
    return Result(
        r.method,
        r.family,
        r.param,
        np.concatenate([x.n_used for x in results]),
        np.concatenate([x.correct for x in results]),
    )


def leave_one_family_out(
    banks: Sequence[Bank] | None = None,
    *,
    budget: int = 40,
    orders: int = 8,
    seed: int = 0,
    learned_costs: Sequence[float] = LEARNED_COSTS,
    bayes_costs: Sequence[float] = BAYES_COSTS,
    iterations: int | None = None,
    map_fn: Callable[[Callable[[int], HeldOut], list[int]], Iterable[HeldOut]] = map,
) -> tuple[TransferReport, dict[str, list[Result]]]:
    """For each bank (default: the seven embedded families): train the learned policy (exact
    policy gradient, majority vote) at each of ``learned_costs`` on the other banks, fit the
    label-free prior on the held-out calibration half, and evaluate both, every rule setting and
    fixed-``budget`` voting on the reported half. The held-out families are independent and
    seeded, so ``map_fn`` (a Ray map from the CLI's ``--ray``) may run them in parallel with the
    same results. Returns the report and every result per family."""
    check_numbers(cost=0.0, budget=budget)
    banks = list(banks) if banks is not None else [default_bank(n) for n in default_bank_names()]
    if len(banks) < 2:
        raise ValueError("leave-one-family-out needs at least two banks")
    rep = TransferReport(PROTOCOL, budget, orders, seed, list(learned_costs), list(bayes_costs))
    run = partial(
        held_out,
        banks=banks,
        budget=budget,
        orders=orders,
        seed=seed,
        learned_costs=tuple(learned_costs),
        bayes_costs=tuple(bayes_costs),
        iterations=iterations,
    )
    per_family: dict[str, list[Result]] = {}
    for fam, results in map_fn(run, list(range(len(banks)))):
        rep.families.append(fam)
        per_family[fam.family] = results
    rep.rows = transfer_rows(per_family, budget, seed)
    return rep, per_family


HeldOut = tuple[FamilyTransfer, list[Result]]


def first_stop_with_sprt(policy: StopPolicy, name: str) -> Method:
    """The learned policy, stopped also as soon as ConSol's default SPRT would stop: the SPRT
    ends the contests it can call (the leader three votes ahead), which a policy trained on other
    families may prolong, and the policy ends the others."""
    learned, sprt = policy_rule(policy), consol_sprt()
    return Method(
        name,
        "learned+sprt",
        policy.config.cost,
        lambda pt, budget: min(learned(pt, budget), sprt(pt, budget)),
    )


def held_out(
    k: int,
    *,
    banks: Sequence[Bank],
    budget: int,
    orders: int,
    seed: int,
    learned_costs: Sequence[float],
    bayes_costs: Sequence[float],
    iterations: int | None,
) -> HeldOut:
    """Bank ``k`` held out: its summary and every method's result on its reported half."""
    from .pool import build_pool

    held = banks[k]
    train = merge([b for j, b in enumerate(banks) if j != k], f"all-but-{held.name}")
    pool = build_pool(train, budget, 16, seed)
    policies = []
    for c in learned_costs:
        pol, _ = train_policy(train, c, budget=budget, seed=seed, iterations=iterations, pool=pool)
        pol.config.trained_on = [b.name for j, b in enumerate(banks) if j != k]
        policies += [
            policy_method(pol, f"learned(c={c:g})"),
            first_stop_with_sprt(pol, f"learned+sprt(c={c:g})"),
        ]
    adaptive = adaptive_pool(train, budget, 16, seed)
    adapted = [
        train_adaptive(train, c, budget=budget, seed=seed, iterations=iterations, pool=adaptive)
        for c in learned_costs
    ]
    start = fit_label_free(train, budget)  # the prior before the held-out family's first refit
    calib, reported = split(held, 0.5, seed + 1)
    prior = fit_label_free(calib, budget)
    reps = tables(reported, budget, orders, seed)
    results = [
        run_rule(reported, reps, m, budget) for m in default_methods(budget) + sweep_methods() + policies
    ]
    for c, fn in bayes_stoppers(prior, list(bayes_costs), budget):
        results.append(run_stopper(reported, reps, f"bayes-adapted(c={c:g})", "bayes-adapted", c, fn))
    for c, pol in zip(learned_costs, adapted, strict=True):
        results.append(
            run_online(
                reported, reps, adaptive_stopper(pol), start, f"learned-online(c={c:g})", "learned-online", c
            )
        )
    learned = [r for r in results if r.family == "learned"]
    online = [r for r in results if r.family == "learned-online"]
    with_sprt = [r for r in results if r.family == "learned+sprt"]
    rules = [r for r in results if r.family in RULE_FAMILIES]
    fam = FamilyTransfer(
        held.name,
        len(reported),
        len(calib),
        len(calib) * budget,
        prior,
        next(r for r in results if r.method == "hindsight-oracle").mean_samples,
        sum(bool(dominating_rules(r, rules)) for r in learned),
        len(learned),
        sum(bool(dominating_rules(r, rules)) for r in online),
        sum(bool(dominating_rules(r, rules)) for r in with_sprt),
    )
    return fam, results


def transfer_rows(per_family: dict[str, list[Result]], budget: int, seed: int) -> list[MethodRow]:
    """Rows of the learned policies (plain, online-adapted, and stopping also where SPRT does),
    the adapted Bayes rules and ConSol's default SPRT for each family and for all families pooled
    (each question once, so a pooled CI is over questions)."""
    shown = ("learned", "learned+sprt", "learned-online", "bayes-adapted")
    names = [r.method for r in next(iter(per_family.values())) if r.family in shown] + ["consol-sprt"]
    out = []
    pooled: dict[str, list[Result]] = {}
    for fam, results in per_family.items():
        by = {r.method: r for r in results}
        for r in results:
            pooled.setdefault(r.method, []).append(r)
        rules = [r for r in results if r.family in RULE_FAMILIES]
        out += [_row(fam, by[n], by[f"fixed-{budget}"], rules, seed) for n in names]
    merged = {m: _pool(rs) for m, rs in pooled.items()}
    rules = [r for r in merged.values() if r.family in RULE_FAMILIES]
    out += [_row("all", merged[n], merged[f"fixed-{budget}"], rules, seed) for n in names]
    return out


def write_transfer(rep: TransferReport, path: str) -> None:
    """The report as JSON, written to a temporary file and renamed (never half-written; a folder
    at ``path`` was IsADirectoryError at the rename, exit 3: now OT001)."""
    with atomic_output(path) as tmp, open(tmp, "w") as f:
        json.dump(asdict(rep), f, indent=1)
