"""Leave-one-family-out: two training variants of the learned stopping policy that did not beat
the rules (docs/learn.md, "What we tried"), on the protocol of ``orchestrace eval stop
--leave-one-family-out`` (reported half of each held-out family, 8 replay orders, seed 0).

- ``agreement``: trained to agree with the 40-sample majority instead of to be right (the
  training banks' labels removed, so ``build_pool`` rewards agreement): a reward that does not
  depend on how often a family's close contests are won by the right answer.
- ``online+synthetic``: the online-adapted policy (``learn/stopping/online.py``) trained on the
  six families plus 12 synthetic families with priors drawn log-uniformly in [0.3, 5] (a, b,
  alpha; 100 questions each), so that it sees more than six priors.

Prints each variant's front per held-out family and pooled, with the rule settings that dominate
each point. About 10 minutes on 2 shared cores.

    OMP_NUM_THREADS=1 python bench/stop_transfer_variants.py
"""

from __future__ import annotations

import numpy as np

from orchestrace.learn.stopping.adapt import fit_label_free
from orchestrace.learn.stopping.banks import (
    Bank,
    BankQuestion,
    SynthParams,
    default_bank,
    default_bank_names,
    synthetic_bank,
)
from orchestrace.learn.stopping.evaluation import Result, run_rule, tables
from orchestrace.learn.stopping.online import adaptive_pool, adaptive_stopper, run_online, train_adaptive
from orchestrace.learn.stopping.pool import build_pool
from orchestrace.learn.stopping.rules import default_methods, sweep_methods
from orchestrace.learn.stopping.training import merge, policy_method, split, train_policy
from orchestrace.learn.stopping.transfer import RULE_FAMILIES, _pool, dominating_rules

BUDGET, ORDERS, SEED = 40, 8, 0
AGREEMENT_COSTS = (0.001, 0.003, 0.005, 0.01, 0.02)
ONLINE_COSTS = (0.001, 0.003, 0.01)


def unlabelled(bank: Bank) -> Bank:
    return Bank(
        bank.name, [BankQuestion(q.id, q.question, None, q.samples) for q in bank.questions], bank.meta
    )


def synthetic_families(n: int = 12) -> list[Bank]:
    rng = np.random.default_rng(SEED)
    out = []
    for j in range(n):
        a, b, al = np.exp(rng.uniform(np.log(0.3), np.log(5), 3))
        p = SynthParams(a=float(a), b=float(b), alpha=float(al), samples=BUDGET)
        out.append(synthetic_bank(100, p, seed=100 + j, name=f"synthetic{j}"))
    return out


def held_out(k: int, banks: list[Bank], synthetic: list[Bank]) -> list[Result]:
    others = [b for j, b in enumerate(banks) if j != k]
    _, reported = split(banks[k], 0.5, SEED + 1)
    reps = tables(reported, BUDGET, ORDERS, SEED)
    results = [run_rule(reported, reps, m, BUDGET) for m in default_methods(BUDGET) + sweep_methods()]
    blind = merge([unlabelled(b) for b in others], "blind")
    pool = build_pool(blind, BUDGET, 16, SEED)
    for c in AGREEMENT_COSTS:
        pol, _ = train_policy(blind, c, budget=BUDGET, seed=SEED, pool=pool)
        results.append(run_rule(reported, reps, policy_method(pol, f"agreement(c={c:g})"), BUDGET))
    train = merge(others + synthetic, "with-synthetic")
    adaptive = adaptive_pool(train, BUDGET, 16, SEED)
    start = fit_label_free(merge(others, "real"), BUDGET)
    for c in ONLINE_COSTS:
        pol = train_adaptive(train, c, budget=BUDGET, seed=SEED, pool=adaptive)
        name = f"online+synthetic(c={c:g})"
        results.append(run_online(reported, reps, adaptive_stopper(pol), start, name, "variant", c))
    return results


def show(family: str, results: list[Result]) -> None:
    by = {r.method: r for r in results}
    full = by[f"fixed-{BUDGET}"].accuracy
    rules = [r for r in results if r.family in RULE_FAMILIES]
    for prefix in ("agreement", "online+synthetic"):
        cells = []
        for r in results:
            if r.method.startswith(prefix + "("):
                dom = dominating_rules(r, rules)
                cells.append(
                    f"{r.param:g}: {r.accuracy:.3f} @ {r.mean_samples:.2f} ({100 * (r.accuracy - full):+.1f})"
                    + (f" dominated by {dom[0]}" if dom else "")
                )
        print(f"{family:12s} {prefix:17s} " + "; ".join(cells), flush=True)


def main() -> None:
    banks = [default_bank(n) for n in default_bank_names()]
    synthetic = synthetic_families()
    per: dict[str, list[Result]] = {}
    for k, b in enumerate(banks):
        per[b.name] = held_out(k, banks, synthetic)
        show(b.name, per[b.name])
    names = [r.method for r in next(iter(per.values()))]
    show("all", [_pool([dict((r.method, r) for r in rs)[m] for rs in per.values()]) for m in names])


if __name__ == "__main__":
    main()
