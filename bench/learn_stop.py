"""Learned stopping (O5): synthetic banks against the Bayes-optimal rule, the four algorithms, and
the cost of the default job.

Prints, from one run:
1. synthetic banks: learned reward vs the Bayes-optimal rule (exact DP) on fresh questions, with a
   paired bootstrap 95% CI of the ratio over questions;
2. the four algorithms (exact PG, REINFORCE, PPO, GRPO) at one cost, train antonyms -> test
   countries, majority vote (no answer statistic of the test bank is read);
3. wall and CPU time of the default ``orchestrace train stop``.

The real-bank transfers this bench ran until 26 Nov 2026 read the evaluated questions' own
samples (aggregator priors, budget calibration) and are gone; their no-free-samples successors
are ``orchestrace train stop`` and ``orchestrace eval stop --leave-one-family-out``.

    python bench/learn_stop.py [--seeds 0 1 2] [--quick] [--skip-default] [--only-synthetic]
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

from orchestrace.learn.stopping.banks import (
    SynthParams,
    calibrate,
    default_bank,
    synthetic_bank,
)
from orchestrace.learn.stopping.bayes import BayesStopper
from orchestrace.learn.stopping.evaluation import (
    paired_reward_ratio_ci,
    run_rule,
    run_stopper,
    tables,
)
from orchestrace.learn.stopping.pool import build_pool
from orchestrace.learn.stopping.training import (
    policy_method,
    train_policy,
)

BUDGET = 40
MAIN_COST = 0.003
ORDERS = 16  # every held-out question replayed in 16 orders


def fmt_ci(ci: tuple[float, float], nd: int = 3) -> str:
    return f"[{ci[0]:.{nd}f}, {ci[1]:.{nd}f}]"


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


def algorithms_over_seeds(seeds: list[int], algos: list[str]) -> None:
    """The ``algorithms`` run on several seeds (pool and training seeded alike), with the held-out
    reward (accuracy - c x samples): one seed of PPO or GRPO says little, some seeds stop late."""
    print(
        f"\n== algorithms over seeds {seeds[0]}..{seeds[-1]}, train antonyms -> test countries, c={MAIN_COST} =="
    )
    train, test = default_bank("antonyms"), default_bank("countries")
    pts = tables(test, BUDGET, ORDERS)
    rows: dict[str, list[tuple[float, float, float, float]]] = {}
    for seed in seeds:
        pool = build_pool(train, BUDGET, 16, seed)
        for algo in algos:
            pol, hist = train_policy(train, MAIN_COST, algo=algo, pool=pool, seed=seed)
            r = run_rule(test, pts, policy_method(pol), BUDGET)
            row = (
                r.accuracy,
                r.mean_samples,
                r.accuracy - MAIN_COST * r.mean_samples,
                hist[-1]["eval_reward"],
            )
            rows.setdefault(algo, []).append(row)
            print(f"seed {seed} {algo:9s} acc {row[0]:.3f} samples {row[1]:5.2f} held-out reward {row[2]:.4f} "
                  f"train greedy {row[3]:.4f}", flush=True)  # fmt: skip
    for algo, got in rows.items():
        x = np.array(got)
        print(f"{algo:9s} {len(got)} seeds: held-out reward {x[:, 2].mean():.4f} ± {x[:, 2].std():.4f} (median "
              f"{np.median(x[:, 2]):.4f}), {(x[:, 1] > 20).sum()} seeds over 20 samples, acc {x[:, 0].mean():.3f}, "
              f"samples {x[:, 1].mean():.2f}, train greedy {x[:, 3].mean():.4f}")  # fmt: skip


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
    ap.add_argument("--only-synthetic", action="store_true", help="synthetic banks only")
    ap.add_argument(
        "--algorithm-seeds", type=int, help="only the algorithms, on seeds 0..N-1 (held-out reward)"
    )
    ap.add_argument("--algos", nargs="+", default=["exact", "reinforce", "ppo", "grpo"])
    a = ap.parse_args()
    if a.algorithm_seeds:
        algorithms_over_seeds(list(range(a.algorithm_seeds)), a.algos)
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
