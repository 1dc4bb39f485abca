"""PettingZoo Parallel Swarm: team reward vs per-lead credit as each lead's reward (one seed).

python bench/learn_experiments_credit.py [iters] [seed] [credit ...]   # defaults: 200 0 team loo
"""

from __future__ import annotations

import sys
import time

import msgspec

from orchestrace.learn.experiments import train_swarm_parallel


def main() -> None:
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    for credit in sys.argv[3:] or ["team", "loo"]:
        t = time.time()
        r = msgspec.to_builtins(
            train_swarm_parallel(seed=seed, iters=iters, credit=credit, eval_tasks=100).result
        )
        m = r["methods"]["learned_per_lead"]
        print(
            f"credit={credit} iters={iters}: r_perf {m['r_perf']['mean']:.4f} {m['r_perf']['ci95']} "
            f"finish {m['finish_rate']:.3f} critical/serial {m['critical_over_serial']:.3f} "
            f"on_budget {m['on_budget']:.3f} ({time.time() - t:.0f} s)",
            flush=True,
        )
    for k, v in r["methods"].items():
        if k != "learned_per_lead":
            print(
                f"{k}: r_perf {v['r_perf']['mean']:.4f} finish {v['finish_rate']:.3f} "
                f"critical/serial {v['critical_over_serial']:.3f}"
            )


if __name__ == "__main__":
    main()
