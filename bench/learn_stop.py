"""Learned stopping (O5) vs published stopping rules, on real SmolLM2-135M banks and synthetic banks.

Prints, from one run:
1. cross-family transfer on the embedded real banks (train antonyms -> test countries, the default
   job, then leave-one-family-out over every embedded family), each held-out question replayed in
   16 orders: accuracy / mean samples of fixed-k, AC, ESC, ConSol SPRT, the confidence rules, the
   hindsight oracle and the learned policies (majority vote, and with the learned aggregator), with
   bootstrap 95% CIs over questions; the sample reduction vs fixed-40; whether each learned Pareto
   front dominates each baseline's front over its whole parameter range;
2. synthetic banks: learned reward vs the Bayes-optimal rule (exact DP) on fresh questions, with a
   paired bootstrap 95% CI of the ratio over questions;
3. the four algorithms (exact PG, REINFORCE, PPO, GRPO) at one cost;
4. wall and CPU time of the default ``orchestrace train stop``.

    python bench/learn_stop.py [--seeds 0 1 2] [--skip-default] [--only-synthetic | --only-transfer] [--json F]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np

from orchestrace.core.stats import pareto_front
from orchestrace.learn.envs.stopvote import build_pool
from orchestrace.learn.stopping.aggregate import fit_aggregator
from orchestrace.learn.stopping.banks import (
    SynthParams,
    calibrate,
    default_bank,
    default_bank_names,
    synthetic_bank,
)
from orchestrace.learn.stopping.bayes import BayesStopper
from orchestrace.learn.stopping.evaluation import (
    accuracy_at,
    bootstrap_ci,
    dominates,
    paired_diff_ci,
    paired_reward_ratio_ci,
    run_rule,
    run_stopper,
    tables,
)
from orchestrace.learn.stopping.rules import Method, default_methods, fixed_k, sweep_methods
from orchestrace.learn.stopping.training import (
    DEFAULT_EVAL,
    DEFAULT_TRAIN,
    SWEEP_COSTS,
    TARGET_SAMPLES,
    aggregator_answer,
    calibrate_cost,
    merge,
    policy_method,
    train_policy,
)

BUDGET = 40
MAIN_COST = 0.003
ORDERS = 16  # every held-out question replayed in 16 orders
RECORD: list[dict] = []  # every transfer's figures, written by --json


def fmt_ci(ci: tuple[float, float], nd: int = 3) -> str:
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


_BASE: dict[str, tuple[list, list]] = {}


def test_bank(test_name: str):
    """An embedded bank, or several merged ('plurals+comparatives')."""
    parts = [default_bank(n) for n in test_name.split("+")]
    return parts[0] if len(parts) == 1 else merge(parts, test_name)


def baselines(test_name: str) -> tuple[list, list]:
    """Every baseline and its sweep on one test bank (independent of the training seed)."""
    if test_name not in _BASE:
        test = test_bank(test_name)
        reps = tables(test, BUDGET, ORDERS)
        _BASE[test_name] = (
            reps,
            [run_rule(test, reps, m, BUDGET) for m in default_methods(BUDGET) + sweep_methods()],
        )
    return _BASE[test_name]


def transfer(train_names: list[str], test_name: str, seed: int) -> dict:
    train = merge([default_bank(n) for n in train_names], "+".join(train_names))
    test = test_bank(test_name)
    reps, base = baselines(test_name)
    agg = fit_aggregator([train], BUDGET, seed=seed)
    learned: dict[str, list] = {"learned": [], "learned+agg": []}
    target: dict[str, tuple] = {}
    for kind, aggregator in (("learned", None), ("learned+agg", agg)):
        pool = build_pool(train, BUDGET, 16, seed, aggregator=aggregator)
        for c in sorted({MAIN_COST, *SWEEP_COSTS}):
            pol, _ = train_policy(train, c, pool=pool, seed=seed)
            learned[kind].append((c, run_rule(test, reps, policy_method(pol, f"{kind}(c={c:g})"), BUDGET)))
        # the policy for a budget of 5 samples, calibrated on the held-out samples (never labels)
        pol, c, _used = calibrate_cost(train, test, TARGET_SAMPLES, pool=pool, budget=BUDGET, seed=seed)
        target[kind] = (
            c,
            run_rule(test, reps, policy_method(pol, f"{kind}(target={TARGET_SAMPLES:g})"), BUDGET),
        )
    agg40 = run_rule(
        test, reps, Method("fixed-40+agg", "fixed-k", 40, fixed_k(40), aggregator_answer(agg)), BUDGET
    )
    by = {r.method: r for r in base}
    full, oracle = by["fixed-40"], by["hindsight-oracle"]
    dom: dict[str, dict[str, bool]] = {}
    short: dict[str, dict[str, float]] = {}
    for kind, pts in learned.items():
        ours_front = pareto_front([(r.mean_samples, r.accuracy) for _, r in pts])
        dom[kind], short[kind] = {}, {}
        for fam in ("ac-beta", "ac-dirichlet", "esc", "consol-sprt"):
            front = pareto_front([(r.mean_samples, r.accuracy) for r in base if r.family == fam])
            dom[kind][fam] = dominates(ours_front, front)
            # worst accuracy shortfall (points) of our front at a baseline point's sample count
            short[kind][fam] = round(max(100 * (a - accuracy_at(ours_front, n)) for n, a in front), 2)
    main = dict(learned["learned"])[MAIN_COST]
    main_agg = dict(learned["learned+agg"])[MAIN_COST]
    return {
        "seed": seed,
        "full": full,
        "oracle": oracle,
        "main": main,
        "main_agg": main_agg,
        "agg40": agg40,
        "aggregator": agg,
        "learned": learned,
        "base": by,
        "dominates": dom,
        "shortfall": short,
        "diff": paired_diff_ci(main, full, seed=seed),
        "diff_agg": paired_diff_ci(main_agg, full, seed=seed),
        "target": {k: (c, r, paired_diff_ci(r, full, seed=seed)) for k, (c, r) in target.items()},
    }


def _row(name: str, r, seed: int) -> None:
    ci = bootstrap_ci(r, seed=seed)
    print(
        f"{name:28s} {r.accuracy:9.3f} {fmt_ci(ci['accuracy']):>16s} {r.mean_samples:8.2f} {fmt_ci(ci['mean_samples'], 2):>16s}"
    )


def _goal_line(tag: str, m, f, diff: dict) -> str:
    return (
        f"{tag} acc {m.accuracy:.3f} vs fixed-40 {f.accuracy:.3f} (gap {100 * (m.accuracy - f.accuracy):+.1f} points, "
        f"paired 95% CI {fmt_ci(tuple(100 * x for x in diff['accuracy']), 1)}), samples {m.mean_samples:.2f} = "
        f"{f.mean_samples / m.mean_samples:.1f}x fewer"
    )


def print_transfer(train_names: list[str], test_name: str, seeds: list[int]) -> list[dict]:
    print(
        f"\n== real banks: train {'+'.join(train_names)} -> test {test_name} (budget {BUDGET}, {ORDERS} orders) =="
    )
    outs = [transfer(train_names, test_name, s) for s in seeds]
    o = outs[0]
    print(
        f"questions: {len(o['full'].correct)} x {ORDERS} orders   bootstrap: 1000 resamples over questions, seed {o['seed']}"
    )
    print(f"{'method':28s} {'accuracy':>9s} {'95% CI':>16s} {'samples':>8s} {'95% CI':>16s}")
    rows = [
        "fixed-1",
        "fixed-5",
        "fixed-10",
        "fixed-40",
        "ac-beta(0.95)",
        "ac-dirichlet(0.95)",
        "esc(w=5)",
        "consol-sprt",
        "majority-share(0.8)",
        "entropy(0.75)",
        "hindsight-oracle",
    ]
    for name in rows:
        _row(name, o["base"][name], o["seed"])
    _row("fixed-40 + learned aggregator", o["agg40"], o["seed"])
    for kind in ("learned", "learned+agg"):
        for _c, r in o["learned"][kind]:
            _row(r.method, r, o["seed"])
        _row(o["target"][kind][1].method, o["target"][kind][1], o["seed"])
    for o in outs:
        f = o["full"]
        print(
            f"seed {o['seed']}: {_goal_line(f'learned(c={MAIN_COST})', o['main'], f, o['diff'])}; "
            f"{_goal_line('with aggregator', o['main_agg'], f, o['diff_agg'])}; "
            f"oracle {o['oracle'].mean_samples:.2f} samples ({f.mean_samples / o['oracle'].mean_samples:.1f}x), "
            f"gap to oracle {o['main'].mean_samples - o['oracle'].mean_samples:+.2f} samples; "
            f"aggregator weights {o['aggregator'].weights}; fixed-40+agg {o['agg40'].accuracy:.3f}; "
            f"dominates fronts: {o['dominates']}; worst shortfall in points (<= 0: dominates): {o['shortfall']}"
        )
        for kind, (c, r, d) in o["target"].items():
            print(
                f"seed {o['seed']}: {_goal_line(f'{kind}, budget {TARGET_SAMPLES:g} (c={c:.4g})', r, f, d)}"
            )
    RECORD.append(
        {
            "train": train_names,
            "test": test_name,
            "baselines": [r.row() for r in outs[0]["base"].values()],
            "seeds": [
                {
                    "seed": o["seed"],
                    "learned": [r.row() for kind in o["learned"].values() for _, r in kind],
                    "fixed-40+agg": o["agg40"].row(),
                    "aggregator": list(o["aggregator"].weights),
                    "dominates": o["dominates"],
                    "shortfall": o["shortfall"],
                    "target": {k: {"cost": c, **r.row()} for k, (c, r, _d) in o["target"].items()},
                }
                for o in outs
            ],
        }
    )
    return outs


def synthetic(params: SynthParams, cost: float, seed: int, label: str) -> dict:
    train = synthetic_bank(2000, params, seed=seed)
    test = synthetic_bank(4000, params, seed=seed + 1000)
    pol, _ = train_policy(train, cost, seed=seed, perms=16, iterations=300)
    pts = tables(test, BUDGET, 4)
    t = time.time()
    out = {}
    for mode in ("majority", "map"):
        bs = BayesStopper(params, cost, BUDGET, answer=mode)
        res = run_stopper(test, pts, "bayes", "bayes", cost, bs.run)
        out[mode] = (res, res.accuracy - cost * res.mean_samples, bs.expected_reward())
    dp_s = time.time() - t
    ours = run_rule(test, pts, policy_method(pol), BUDGET)
    r_o = ours.accuracy - cost * ours.mean_samples
    bayes, r_b, ev = out["majority"]
    _, r_map, _ = out["map"]
    ci = paired_reward_ratio_ci(ours, bayes, cost)
    print(
        f"{label:26s} c={cost:<6g} seed {seed}: Bayes-optimal stopping for majority vote {r_b:.4f} "
        f"(model expectation {ev:.4f}; acc {bayes.accuracy:.3f}, {bayes.mean_samples:.2f} samples) | learned {r_o:.4f} "
        f"(acc {ours.accuracy:.3f}, {ours.mean_samples:.2f} samples) | learned/Bayes {100 * r_o / r_b:.1f}% "
        f"(95% CI {fmt_ci(tuple(100 * x for x in ci), 1)}) | "
        f"Bayes with MAP answers {r_map:.4f} [DP {dp_s:.0f}s]"
    )
    return {"bayes": r_b, "learned": r_o, "ratio": r_o / r_b, "ratio_ci95": ci}


def algorithms(seed: int) -> None:
    print(f"\n== algorithms, train antonyms -> test countries, c={MAIN_COST}, seed {seed} ==")
    train, test = default_bank("antonyms"), default_bank("countries")
    pool = build_pool(train, BUDGET, 16, seed)
    pts = tables(test, BUDGET, ORDERS)
    for algo in ("exact", "reinforce", "ppo", "grpo"):
        t, c0 = time.time(), time.process_time()
        pol, hist = train_policy(train, MAIN_COST, algo=algo, pool=pool, seed=seed)
        r = run_rule(test, pts, policy_method(pol), BUDGET)
        last = hist[-1]
        print(
            f"{algo:10s} held-out acc {r.accuracy:.3f} samples {r.mean_samples:5.2f} | train-bank greedy reward "
            f"{last['eval_reward']:.4f} | {len(hist)} iterations, {time.time() - t:.0f}s wall, {time.process_time() - c0:.0f}s CPU"
        )


def default_command() -> None:
    print("\n== default `orchestrace train stop` ==")
    with tempfile.TemporaryDirectory() as d:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.time()
        p = subprocess.run(
            [
                sys.executable,
                "-c",
                "from orchestrace.cli import main; main()",
                "train",
                "stop",
                "-o",
                os.path.join(d, "p"),
            ],
            capture_output=True,
            text=True,
        )
        wall = time.time() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        print(p.stdout.strip().splitlines()[-2] if p.returncode == 0 else p.stderr[-2000:])
        load = os.getloadavg()[0]
        print(f"wall {wall:.1f}s, CPU {cpu:.1f}s (1-min load average {load:.1f} on {os.cpu_count()} cores)")
        rep = json.load(open(os.path.join(d, "report", "report.json")))
        print(f"report: {sorted(os.listdir(os.path.join(d, 'report')))}; goal {rep['goal']}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--quick", action="store_true", help="one synthetic setting, one cost")
    ap.add_argument("--skip-default", action="store_true")
    ap.add_argument("--json", help="also write every transfer's figures to this file")
    ap.add_argument("--skip-transfer", action="store_true", help="synthetic, algorithms and default job only")
    ap.add_argument("--only-synthetic", action="store_true", help="synthetic banks only")
    ap.add_argument("--only-transfer", action="store_true", help="real-bank transfers only")
    a = ap.parse_args()
    a.skip_transfer |= a.only_synthetic
    print("SPRT: our reimplementation vs the real consol 0.3.0 package: python bench/consol_crosscheck.py")
    names = [] if a.skip_transfer else list(default_bank_names())
    if not a.skip_transfer:
        print_transfer(list(DEFAULT_TRAIN), "+".join(DEFAULT_EVAL), a.seeds)
        print_transfer(["antonyms"], "countries", a.seeds)
    for test_name in names:  # leave one family out: train on every other embedded family
        print_transfer([n for n in names if n != test_name], test_name, a.seeds)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(RECORD, f, indent=1)
    if a.only_transfer:
        return
    print("\n== synthetic banks: learned vs Bayes-optimal (train 2000 questions, test 4000 fresh ones) ==")
    ratios = []
    settings = [
        ("calibrated to antonyms", calibrate(default_bank("antonyms"))),
        ("calibrated to countries", calibrate(default_bank("countries"))),
        ("default SynthParams", SynthParams()),
    ]
    for seed in a.seeds:
        for label, params in settings[1:2] if a.quick else settings:
            for cost in (0.01,) if a.quick else (0.003, 0.01):
                ratios.append(synthetic(params, cost, seed, label)["ratio"])
    print(
        f"learned reward / Bayes-optimal reward: min {100 * min(ratios):.1f}%, mean {100 * np.mean(ratios):.1f}%, "
        f"{sum(r >= 0.98 for r in ratios)} of {len(ratios)} within 2%"
    )
    if a.only_synthetic:
        return
    algorithms(a.seeds[0])
    if not a.skip_default:
        default_command()


if __name__ == "__main__":
    main()
