"""Credit benchmark: Shapley estimation error vs permutation samples; credit throughput per method.

    python bench/credit_bench.py [--n 1000] [--size 1000] [--unit agent] [--samples 64]

Part 1 compares permutation-sampled Shapley values with exact ones (a removal game on a real
generated trace with <= 12 agents, and a 20-player glove game with closed-form values) and reports
the mean absolute error next to the mean standard error the estimator reports for itself.
Part 2 runs every credit method (``assign_credit``: compute and write onto the events) over
``--n`` generated traces of ``--size`` events and prints traces/s and events/s.
"""

from __future__ import annotations

import argparse
import gc
import time

import msgspec
import numpy as np

from orchestrace.credit import FnGame, RemovalGame, assign_credit, shapley, unit_keys
from orchestrace.gen import GEN_TOPOLOGIES, generate


def sampling_error(seeds: int = 8) -> None:
    # a 3-level hierarchy (orchestrator -> managers -> workers) that succeeded: its removal game has
    # 3-player interactions, which antithetic pairs do not cancel (2-level ones they do exactly)
    tr = next(
        t
        for i in range(200)
        if len((t := generate(seed=1000 + i, size=80, width=3, topology="hierarchical")).agents()) <= 14
        and t.rewards["team"] == 1.0
    )
    game = RemovalGame(tr, unit_keys(tr, "agent"))
    exact = shapley(game, exact_max=14)
    n_right = 19
    glove = FnGame(
        ["L"] + [f"R{i}" for i in range(n_right)], lambda s: min(int("L" in s), len(s) - int("L" in s))
    )
    glove_exact = {
        "L": n_right / (n_right + 1),
        **{f"R{i}": 1 / (n_right * (n_right + 1)) for i in range(n_right)},
    }
    print(f"# Shapley permutation sampling vs exact ({seeds} seeds; antithetic pairs)")
    print(
        f"  removal game: hierarchical trace, {len(game.players)} agents, {len(tr.events)} events; glove game: 20 players"
    )
    print(
        f"{'perms':>6s} {'MAE removal':>12s} {'mean SE':>9s} {'MAE glove':>10s} {'mean SE':>9s} {'evals(glove)':>13s}"
    )
    for m in (8, 16, 32, 64, 128, 256, 512, 1024):
        rows = []
        for g, ref in ((game, exact.values), (glove, glove_exact)):
            errs, ses = [], []
            for s in range(seeds):
                res = shapley(g, samples=m, seed=s, exact_max=0)
                errs.append(np.mean([abs(res.values[k] - ref[k]) for k in ref]))
                ses.append(np.mean(list(res.stderr.values())))
            rows.append((float(np.mean(errs)), float(np.mean(ses)), res.evaluations))
        print(
            f"{m:6d} {rows[0][0]:12.5f} {rows[0][1]:9.5f} {rows[1][0]:10.5f} {rows[1][1]:9.5f} {rows[1][2]:13d}"
        )


def throughput(n: int, size: int, unit: str, samples: int) -> None:
    t0 = time.perf_counter()
    traces = [generate(seed=i, size=size, topology=GEN_TOPOLOGIES[i % len(GEN_TOPOLOGIES)]) for i in range(n)]
    # 8 runs per task so group methods (GRPO, Dr. MAS, C3) see real groups
    traces = [msgspec.structs.replace(t, task_id=f"task-{i // 8}") for i, t in enumerate(traces)]
    n_ev = sum(len(t.events) for t in traces)
    print(
        f"\n# credit throughput: {n} traces, {n_ev} events ({n_ev / n:.0f}/trace), unit={unit}; "
        f"generated in {time.perf_counter() - t0:.1f} s"
    )
    print(f"{'method':10s} {'traces/s':>10s} {'events/s':>12s} {'seconds':>8s}")
    gc.collect()
    gc.freeze()  # the corpus is long-lived: keep the collector from rescanning a million events per method
    for method in ("broadcast", "grpo", "drmas", "loo", "shapley", "c3", "coma"):
        opts = {"samples": samples} if method == "shapley" else {}
        t = time.perf_counter()
        assign_credit(traces, method, unit, inplace=True, **opts)
        dt = time.perf_counter() - t
        print(f"{method:10s} {n / dt:10.1f} {n_ev / dt:12.0f} {dt:8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--size", type=int, default=1000)
    ap.add_argument("--unit", default="agent")
    ap.add_argument("--samples", type=int, default=64, help="Shapley permutations (agents > 12)")
    ap.add_argument("--seeds", type=int, default=8)
    a = ap.parse_args()
    sampling_error(a.seeds)
    throughput(a.n, a.size, a.unit, a.samples)


if __name__ == "__main__":
    main()
