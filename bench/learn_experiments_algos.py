"""Benchmark: REINFORCE vs PPO vs GRPO (and ``--algos exact``: exact PG) on RetryStop, Delegate,
Swarm and the PettingZoo Parallel Swarm.

Usage:
    python bench/learn_experiments_algos.py --seeds 0 1 2 [--only retry delegate swarm parallel]
                                     [--algos reinforce ppo grpo exact] [--out runs/bench_learn_experiments_algos]
    python bench/learn_experiments_algos.py --summary [--out ...]   # table over every seed file in --out

Every run trains on the training split and reports the held-out reward (mean and 95% percentile
bootstrap CI over held-out items, from the task functions) plus the training wall time; one JSON
per seed (``seed-S.json``) so that seeds can run in separate processes. ``--summary`` prints the
markdown table of docs/learn_experiments.md: mean over seeds ± their standard deviation, and the seed
CIs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import msgspec
import numpy as np

from orchestrace.learn.experiments import (
    train_delegate,
    train_retry,
    train_swarm,
    train_swarm_parallel,
)

RETRY = (("alfworld", 0.25), ("humaneval", 0.1))
DELEGATE = (("mmlu", 0.1, "route"), ("gsm8k", 0.2, "cascade"))


def _row(reward: dict, extra: dict, secs: float) -> dict:
    return {"mean": reward["mean"], "ci95": reward["ci95"], **extra, "seconds": secs}


def run_retry(algo: str, seed: int) -> dict:
    out = {}
    for fam, c in RETRY:
        t0 = time.perf_counter()
        v = msgspec.to_builtins(train_retry([fam], c, seed=seed, iters=300, batch=128, algo=algo).result)[
            "families"
        ][fam]
        out[f"retry {fam} c={c}"] = _row(v["learned"]["reward"], {
            "attempts": v["learned"]["mean_attempts"], "cap_train": v["fixed_caps"][str(v["cap_chosen_on_train"])]["reward"],
        }, time.perf_counter() - t0)  # fmt: skip
    return out


def run_delegate(algo: str, seed: int) -> dict:
    out = {}
    for src, lam, mode in DELEGATE:
        t0 = time.perf_counter()
        r = msgspec.to_builtins(train_delegate(src, lam, seed=seed, iters=200, mode=mode, algo=algo).result)
        m = r["methods"]
        out[f"delegate {src} {mode} lambda={lam}"] = _row(m["learned"]["reward"], {
            "best_single": m[r["best_single_model"]]["reward"]["mean"], "threshold": m["threshold_router"]["reward"]["mean"],
        }, time.perf_counter() - t0)  # fmt: skip
    return out


def run_swarm(algo: str, seed: int) -> dict:
    t0 = time.perf_counter()
    m = msgspec.to_builtins(train_swarm(seed=seed, algo=algo).result)["methods"]
    v = m["learned"]
    return {"swarm r_perf": _row(v["r_perf"], {
        "finish_rate": v["finish_rate"], "critical_over_serial": v["critical_over_serial"]["mean"],
        "makespan_heuristic": m["makespan_heuristic"]["r_perf"]["mean"],
    }, time.perf_counter() - t0)}  # fmt: skip


def run_parallel(algo: str, seed: int) -> dict:
    t0 = time.perf_counter()
    m = msgspec.to_builtins(train_swarm_parallel(seed=seed, algo=algo).result)["methods"]
    v = m["learned_per_lead"]
    rules = {k: {"r_perf": w["r_perf"]["mean"], "finish_rate": w["finish_rate"],
                 "critical_over_serial": w["critical_over_serial"]} for k, w in m.items() if k != "learned_per_lead"}  # fmt: skip
    return {"swarm-parallel r_perf": _row(v["r_perf"], {
        "finish_rate": v["finish_rate"], "critical_over_serial": v["critical_over_serial"], "rules": rules,
    }, time.perf_counter() - t0)}  # fmt: skip


RUNS = {"retry": run_retry, "delegate": run_delegate, "swarm": run_swarm, "parallel": run_parallel}


def summary(out: Path) -> None:
    seeds = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in sorted(out.glob("seed-*.json"))}
    algos = sorted({a for s in seeds.values() for a in s}, key=["reinforce", "ppo", "grpo", "exact"].index)
    runs = list(dict.fromkeys(k for s in seeds.values() for a in s.values() for k in a))
    print(f"seeds {sorted(seeds)}; held-out reward, mean over seeds ± sd [seed CIs]\n")
    print("| run | " + " | ".join(algos) + " |\n|---|" + "---|" * len(algos))
    for run in runs:
        cells = []
        for a in algos:
            rows = [s[a][run] for s in seeds.values() if a in s and run in s[a]]
            if not rows:
                cells.append("-")
                continue
            m = np.array([r["mean"] for r in rows])
            cis = " ".join(f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]" for r in rows)
            extra = ""
            if "finish_rate" in rows[0]:
                f = np.mean([r["finish_rate"] for r in rows])
                c = np.mean([r["critical_over_serial"] for r in rows])
                extra = f"; finish {f:.3f}, CS/serial {c:.3f}"
            cells.append(
                f"{m.mean():.4f} ± {m.std():.4f} {cis}{extra}; {np.mean([r['seconds'] for r in rows]):.0f} s"
            )
        print(f"| {run} | " + " | ".join(cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--only", nargs="+", default=list(RUNS))
    ap.add_argument("--algos", nargs="+", default=["reinforce", "ppo", "grpo"])
    ap.add_argument("--out", type=Path, default=Path("runs/bench_learn_experiments_algos"))
    ap.add_argument("--summary", action="store_true", help="only print the table of the seed files in --out")
    a = ap.parse_args()
    if not a.summary:
        a.out.mkdir(parents=True, exist_ok=True)
        for seed in a.seeds:
            path = a.out / f"seed-{seed}.json"
            res: dict = json.loads(path.read_text()) if path.exists() else {}
            for algo in a.algos:
                for name in a.only:
                    rows = RUNS[name](algo, seed)
                    res.setdefault(algo, {}).update(rows)
                    for k, v in rows.items():
                        print(f"seed {seed} {algo:9s} {k:40s} {v['mean']:.4f} [{v['ci95'][0]:.4f}, "
                              f"{v['ci95'][1]:.4f}] ({v['seconds']:.0f} s)", flush=True)  # fmt: skip
                    path.write_text(json.dumps(res, indent=2) + "\n")
    summary(a.out)


if __name__ == "__main__":
    main()
