"""Benchmark: RetryStop, Delegate and Swarm learned policies vs their baselines on held-out items.

Usage:
    python bench/learn_experiments.py [--seeds 0 1 2] [--only retry delegate swarm] [--out runs/bench_learn_experiments]

Prints one block per environment and seed (held-out reward with its 95% bootstrap CI, the
baselines, the paired learned - baseline difference with its CI) and writes every result as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import msgspec

from orchestrace.learn.experiments import (
    eval_swarm_parallel,
    train_delegate,
    train_retry,
    train_swarm,
    write_trained,
)


def _ci(d: dict) -> str:
    return f"{d['mean']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]"


RETRY_RUNS = (("alfworld", 0.1), ("alfworld", 0.25), ("humaneval", 0.05), ("humaneval", 0.1), ("game24", 0.005),
              ("game24", 0.01))  # fmt: skip


def bench_retry(seed: int, out: Path) -> dict:
    runs = {}
    for fam, c in RETRY_RUNS:
        trained = train_retry([fam], c, seed=seed, iters=300, batch=128)
        r = msgspec.to_builtins(write_trained(out / f"retry-s{seed}-c{c}", trained))
        runs[f"{fam}@{c}"] = r
        _print_retry(r)
    return runs


def _print_retry(r: dict) -> None:
    for fam, v in r["families"].items():
        ct, cb = str(v["cap_chosen_on_train"]), str(v["cap_best_in_hindsight"])
        caps = v["fixed_caps"]
        print(
            f"retry {fam:9s} c={v['cost']:<5} learned {v['learned']['reward']['mean']:.4f} "
            f"(success {v['learned']['success']:.3f}, attempts {v['learned']['mean_attempts']:.2f}) | "
            f"cap {ct} (train) {caps[ct]['reward']:.4f} | cap {cb} (hindsight) {caps[cb]['reward']:.4f} | "
            f"learned - train cap {_ci(v['learned_minus_train_cap'])}"
        )


def bench_delegate(seed: int, out: Path) -> list[dict]:
    res = []
    for source, lam, mode in (("mmlu", 0.1, "route"), ("gsm8k", 0.2, "cascade"), ("alpaca", 0.05, "route")):
        trained = train_delegate(source, lam, seed=seed, iters=200, mode=mode)
        r = msgspec.to_builtins(write_trained(out / f"delegate-s{seed}", trained))
        m = r["methods"]
        best = r["best_single_model"]
        print(
            f"delegate {source:6s} {mode:7s} lambda={lam}: learned {m['learned']['reward']['mean']:.4f} "
            f"(q {m['learned']['quality']:.3f}, ${m['learned']['usd_per_1k_queries']:.3f}/1k) | "
            f"best single {best.split(':', 1)[1]} {m[best]['reward']['mean']:.4f} "
            f"(q {m[best]['quality']:.3f}, ${m[best]['usd_per_1k_queries']:.3f}/1k) | "
            f"threshold {m['threshold_router']['reward']['mean']:.4f} | "
            + (f"rule cascade {m['rule_cascade']['reward']['mean']:.4f} | " if "rule_cascade" in m else "")
            + f"oracle {m['oracle']['reward']['mean']:.4f} | "
            f"learned - best single {_ci(r['learned_minus_single'])} | learned - threshold "
            f"{_ci(r['learned_minus_threshold_router'])} | quality/$ ratio vs best single "
            f"{r['vs_best_single']['quality_per_dollar_ratio']:.2f}"
        )
        res.append(r)
    return res


def bench_swarm(seed: int, out: Path) -> dict:
    r = msgspec.to_builtins(write_trained(out / f"swarm-s{seed}", train_swarm(seed=seed)))
    for k, v in r["methods"].items():
        print(
            f"swarm {k:18s} r_perf {v['r_perf']['mean']:.3f} finish {v['finish_rate']:.3f} "
            f"critical/serial {v['critical_over_serial']['mean']:.3f} on-budget {v['on_budget']:.3f} "
            f"spawned/stage {v['spawned_per_stage']:.2f}"
        )
    # the same policy run by every lead of the PettingZoo Parallel env (3 leads act at once)
    p = msgspec.to_builtins(
        eval_swarm_parallel(out / f"swarm-s{seed}" / "swarm.safetensors", eval_tasks=100, seed=seed)
    )
    for k, v in p["methods"].items():
        print(
            f"swarm-parallel {k:18s} r_perf {v['r_perf']['mean']:.3f} finish {v['finish_rate']:.3f} "
            f"critical/serial {v['critical_over_serial']:.3f} on-budget {v['on_budget']:.3f}"
        )
    r["parallel"] = p
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--only", nargs="+", default=["retry", "delegate", "swarm"])
    ap.add_argument("--out", type=Path, default=Path("runs/bench_learn_experiments"))
    a = ap.parse_args()
    results: dict = {}
    for seed in a.seeds:
        for name, fn in (("retry", bench_retry), ("delegate", bench_delegate), ("swarm", bench_swarm)):
            if name in a.only:
                t0 = time.perf_counter()
                results[f"{name}-s{seed}"] = fn(seed, a.out)
                print(f"  [{name} seed {seed}: {time.perf_counter() - t0:.1f} s]")
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {a.out / 'bench.json'}")


if __name__ == "__main__":
    main()
