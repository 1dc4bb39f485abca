"""Live equals offline: a stop policy trained offline on sample banks, run live in the vote program.

A stop policy is trained (exact PG) on the embedded banks of five families at budget B; on a
held-out family it is evaluated offline (replaying that family's embedded SmolLM2-135M samples,
``--orders`` orders) and live (the vote program on the local SmolLM2-135M, same prompt, T=0.7,
the policy asked after every finished worker) with parallel waves of width w. Reports accuracy
and mean samples with 95% bootstrap CIs (over questions), whether each live figure falls in the
offline CI, and per w: workers launched (a stop mid-wave cancels the rest), wall-clock seconds
and Critical Steps of the trace.

    OMP_NUM_THREADS=1 python bench/learn_stop_live.py --questions 30 --widths 1,2,4 -o runs/bench/stop_live
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import numpy as np

from orchestrace.core.io import load_one
from orchestrace.learn.policies import LearnedStop
from orchestrace.learn.stopping.banks import default_bank
from orchestrace.learn.stopping.evaluation import bootstrap_ci, run_rule, tables
from orchestrace.learn.stopping.families import family
from orchestrace.learn.stopping.loop_stop import majority_right
from orchestrace.learn.stopping.traces import episode_from_trace
from orchestrace.learn.stopping.training import DEFAULT_TRAIN, merge, policy_method, train_policy
from orchestrace.measure import critical_steps
from orchestrace.runtime.backends.smollm2 import SmolLM2Backend
from orchestrace.runtime.runner import execute


def _ci(x: np.ndarray, seed: int = 0, n_boot: int = 1000) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    m = x[rng.integers(0, len(x), (n_boot, len(x)))].mean(axis=1)
    return float(np.percentile(m, 2.5)), float(np.percentile(m, 97.5))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", default="plurals")
    ap.add_argument("--questions", type=int, default=30)
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--cost", type=float, default=0.01)
    ap.add_argument("--widths", default="1,2,4")
    ap.add_argument("--orders", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", default="runs/bench/stop_live")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    t0 = time.time()
    train = merge([default_bank(n) for n in DEFAULT_TRAIN], "+".join(DEFAULT_TRAIN))
    pol, _ = train_policy(train, a.cost, algo="exact", budget=a.budget, seed=a.seed)
    pol.save(str(out / "policy"))
    train_s = time.time() - t0

    fam = family(a.family)
    held = default_bank(a.family)
    pick = np.sort(
        np.random.default_rng(a.seed).choice(len(held), size=min(a.questions, len(held)), replace=False)
    )
    bank = held.subset(pick.tolist(), f"{a.family}-{len(pick)}")
    res = run_rule(bank, tables(bank, a.budget, a.orders, a.seed), policy_method(pol), a.budget)
    ci = bootstrap_ci(res, seed=a.seed)
    offline = {
        "accuracy": res.accuracy,
        "accuracy_ci95": ci.accuracy,
        "mean_samples": float(res.n_used.mean()),
        "mean_samples_ci95": ci.mean_samples,
    }
    print(
        f"trained in {train_s:.0f} s; offline {a.family} ({len(bank)} q x {a.orders} orders): {offline}",
        flush=True,
    )

    questions = {q.id: q for q in fam.questions}
    backend = SmolLM2Backend(threads=1)
    learned = LearnedStop(pol, "stop", str(out / "policy.safetensors"))
    live: dict[str, dict] = {}
    for w in [int(x) for x in a.widths.split(",")]:
        correct, used, launched, wall, crit = [], [], [], [], []
        for k, bq in enumerate(bank.questions):
            q = questions[bq.id]
            cfg = {"question": q.question, "fewshot": [list(s) for s in fam.shots], "family": fam.name,
                   "question_id": q.id, "gold": q.gold, "budget": a.budget, "width": w, "system": "",
                   "max_tokens": fam.max_new_tokens, "temperature": 0.7}  # fmt: skip
            path = str(out / f"w{w}" / f"{k:03d}.events.jsonl")
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            asyncio.run(execute("vote", path, config=cfg, seed=a.seed * 100_000 + k, backend=backend,
                                trace_id=f"live-w{w}-{k}", trace_policies={"stop": learned}))  # fmt: skip
            tr = load_one(path)
            ep = episode_from_trace(tr, path)
            correct.append(majority_right(ep.answers, ep.gold))
            used.append(len(ep.answers))
            launched.append(sum(1 for e in tr.events if e.type == "spawn"))
            wall.append(max((e.t_end or e.t) for e in tr.events))
            crit.append(critical_steps(tr)["critical"])
        c, u = np.array(correct, float), np.array(used, float)
        live[str(w)] = {
            "accuracy": float(c.mean()),
            "accuracy_ci95": _ci(c, a.seed),
            "mean_samples": float(u.mean()),
            "mean_samples_ci95": _ci(u, a.seed),
            "accuracy_in_offline_ci": bool(
                offline["accuracy_ci95"][0] <= c.mean() <= offline["accuracy_ci95"][1]
            ),
            "samples_in_offline_ci": bool(
                offline["mean_samples_ci95"][0] <= u.mean() <= offline["mean_samples_ci95"][1]
            ),
            "mean_workers_launched": float(np.mean(launched)),
            "mean_wall_clock_s": float(np.mean(wall)),
            "mean_critical_steps": float(np.mean(crit)),
        }
        print(f"live w={w}: {live[str(w)]}", flush=True)
    result = {
        "family": a.family, "questions": len(bank), "budget": a.budget, "cost": a.cost, "seed": a.seed,
        "trained_on": list(DEFAULT_TRAIN), "train_seconds": round(train_s, 1), "offline_orders": a.orders,
        "offline": offline, "live": live,
        "note": "local model calls run one at a time (one CPU model): wider waves cannot cut wall-clock here; "
        "Critical Steps count the dependency depth the trace records",
    }  # fmt: skip
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
