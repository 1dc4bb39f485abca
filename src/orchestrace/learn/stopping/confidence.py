"""Leave-one-family-out with token confidence: do the model's log-probabilities help stopping?

For each held-out family, every tuned method picks its setting on the other families only: the
fewest mean samples whose accuracy there is within ``tol`` of fixed-budget voting (else the most
accurate setting). The held-out family is then replayed once, every method over the same orders,
and each is compared with fixed-budget majority voting by a paired bootstrap over questions.
Nothing is fitted on the held-out family, so all of its questions are reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .banks import Bank
from .evaluation import Result, paired_diff_ci, run_rule, tables
from .rules import (
    Method,
    ac_beta,
    ac_dirichlet,
    confidence_answer,
    confidence_methods,
    consol_sprt,
    default_methods,
    esc,
    fixed_k,
    sweep_methods,
)
from .training import merge
from .transfer import RULE_FAMILIES, dominating_rules

#: rule families whose setting is tuned on the training families (besides the published defaults)
TUNED = (
    "ac-beta",
    "esc",
    "consol-sprt",
    "conf-margin-mean",
    "conf-share-mean",
    "conf-margin-min",
    "conf-share-min",
)


@dataclass(frozen=True)
class ConfidenceRow:
    """One method on one held-out family (or all pooled): figures against fixed-budget voting."""

    family: str
    method: str
    setting: str  # the setting used (for tuned methods, the one picked on the training families)
    accuracy: float
    mean_samples: float
    diff_points: float  # 100 x (accuracy - fixed-budget accuracy)
    diff_ci95: tuple[float, float]  # paired bootstrap, points
    dominated_by: list[str]  # rule settings on this family that dominate it (hindsight check)


def candidates(budget: int) -> list[Method]:
    """Every setting a tuned method may pick from."""
    return [
        m
        for m in sweep_methods() + confidence_methods("mean") + confidence_methods("min")
        if m.family in TUNED
    ]


def pick_on_training(
    train: Bank, budget: int, orders: int, seed: int, tol: float = 0.002
) -> dict[str, Method]:
    """Per tuned family, the setting chosen on ``train`` (the fewest samples within ``tol`` of
    fixed-budget accuracy there, else the most accurate)."""
    reps = tables(train, budget, orders, seed)
    full = run_rule(
        train, reps, Method(f"fixed-{budget}", "fixed-k", budget, fixed_k(budget)), budget
    ).accuracy
    chosen: dict[str, Method] = {}
    by_family: dict[str, list[tuple[Result, Method]]] = {}
    for m in candidates(budget):
        by_family.setdefault(m.family, []).append((run_rule(train, reps, m, budget), m))
    for fam, rs in by_family.items():
        ok = [(r, m) for r, m in rs if r.accuracy >= full - tol]
        best = min(ok, key=lambda x: x[0].mean_samples) if ok else max(rs, key=lambda x: x[0].accuracy)
        chosen[fam] = best[1]
    return chosen


def held_out_methods(chosen: dict[str, Method], budget: int, learned: Sequence[Method]) -> list[Method]:
    """What is reported for one family: fixed-k, the published defaults, the learned policy, the
    tuned settings (renamed ``tuned:...``) and fixed-budget voting weighted by confidence."""
    fixed = [Method(f"fixed-{k}", "fixed-k", k, fixed_k(k)) for k in (1, 3, 5, 10, budget)]
    defaults = [
        Method("ac-beta(0.95)", "ac-beta", 0.95, ac_beta(0.95)),
        Method("ac-dirichlet(0.95)", "ac-dirichlet", 0.95, ac_dirichlet(0.95)),
        Method("esc(w=5)", "esc", 5, esc(5)),
        Method("consol-sprt", "consol-sprt", 3, consol_sprt()),
    ]
    tuned = [Method(f"tuned:{f}", f"tuned:{f}", m.param, m.rule, m.answer) for f, m in chosen.items()]
    weighted = [
        Method(f"fixed-{budget}-conf-{w}", "weighted", budget, fixed_k(budget), confidence_answer(w))
        for w in ("mean", "min")
    ]
    return fixed + defaults + list(learned) + tuned + weighted


@dataclass
class ConfidenceLofo:
    rows: list[ConfidenceRow]  # per held-out family, then ``pooled``
    settings: dict[str, dict[str, str]]  # held-out family -> tuned family -> setting picked
    pooled: dict[str, Result]  # every reported method over all families (each question once)


def lofo_confidence(
    banks: Sequence[Bank],
    *,
    budget: int,
    orders: int = 8,
    seed: int = 0,
    learned: Callable[[Bank], list[Method]] | None = None,
    tol: float = 0.002,
) -> ConfidenceLofo:
    """Rows for every held-out family and for all families pooled (each question once; a pooled
    row is dominated if a rule setting pooled the same way dominates it). ``learned(train)``
    trains policies on the training families and returns them as methods."""
    from .transfer import _pool

    per_family: dict[str, list[Result]] = {}
    settings: dict[str, dict[str, str]] = {}
    rules_by_family: dict[str, list[Result]] = {}
    sweep = [m for m in default_methods(budget) + sweep_methods() if m.family in RULE_FAMILIES]
    for k, held in enumerate(banks):
        train = merge([b for j, b in enumerate(banks) if j != k], f"all-but-{held.name}")
        chosen = pick_on_training(train, budget, orders, seed, tol)
        settings[held.name] = {f: m.name for f, m in chosen.items()}
        reps = tables(held, budget, orders, seed)
        methods = held_out_methods(chosen, budget, learned(train) if learned else [])
        per_family[held.name] = [run_rule(held, reps, m, budget) for m in methods]
        rules_by_family[held.name] = [run_rule(held, reps, m, budget) for m in sweep]
    fams = list(per_family)
    pooled = [_pool([per_family[f][i] for f in fams]) for i in range(len(per_family[fams[0]]))]
    pooled_rules = [_pool([rules_by_family[f][i] for f in fams]) for i in range(len(sweep))]
    groups = [(f, per_family[f], rules_by_family[f]) for f in fams] + [("pooled", pooled, pooled_rules)]
    rows: list[ConfidenceRow] = []
    for fam, results, rules in groups:
        full = next(r for r in results if r.method == f"fixed-{budget}")
        for r in results:
            ci = paired_diff_ci(r, full, seed=seed).accuracy
            tuned = r.method.removeprefix("tuned:")
            setting = settings[fam][tuned] if fam in settings and tuned != r.method else r.method
            rows.append(
                ConfidenceRow(
                    fam,
                    r.method,
                    setting if fam != "pooled" or tuned == r.method else "per family",
                    r.accuracy,
                    r.mean_samples,
                    100 * (r.accuracy - full.accuracy),
                    (100 * ci[0], 100 * ci[1]),
                    dominating_rules(r, rules),
                )
            )
    return ConfidenceLofo(rows, settings, {r.method: r for r in pooled})
