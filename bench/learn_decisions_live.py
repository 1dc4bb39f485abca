"""Live equals offline for the delegate (O2) and spawn width (O1) decisions.

Delegate: a router is trained on RouteLLM MMLU (``train_delegate``, its defaults) and asked live:
the ``route`` program runs every held-out query (the first ``--queries``) with the policy; the
models are not callable here, so the scripted backend answers and the chosen model's logged
quality and price are read from the table. Offline: the policy's greedy action on the test
env's observation of the same query. Reports agreement of the chosen models, reward
(quality - lambda x cost / scale) live vs offline with 95% bootstrap CIs, and the decision's
latency: ``decide(trace)`` (features from the trace + numpy inference) timed on the recorded traces.

Spawn: a Swarm policy is trained (``train_swarm``, ``--swarm-iters``) and asked live: the
``swarm`` program runs each held-out DAG (``--tasks``, the test seed) with the policy (scripted
workers); offline: the env's greedy episode on the same DAG. Reports per-stage width agreement
(over the stages the env plays: it ends an episode at its first late stage; the live program runs
every stage), r_perf of the env's step model on the live widths vs offline, the live trace's
measured Critical Steps (one LLM call per worker: not the env's step units) and ``decide`` timed
on each decision's trace prefix.

    OMP_NUM_THREADS=1 python bench/learn_decisions_live.py --queries 300 --tasks 200 -o runs/bench/decisions_live
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import msgspec
import numpy as np

from orchestrace.core.io import load_one
from orchestrace.core.stats import mean_ci
from orchestrace.learn import load_policy
from orchestrace.learn.experiments.delegate import train_delegate
from orchestrace.learn.experiments.protocol import SPLIT_SEED, split, write_trained
from orchestrace.learn.experiments.swarm import SWARM_TEST_SEED, train_swarm
from orchestrace.measure import critical_steps
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.runner import run


def _ci(x: np.ndarray) -> list[float]:
    return [round(v, 4) for v in mean_ci(np.asarray(x, float), seed=0)[1]]


def delegate(a: argparse.Namespace, out: Path) -> dict:
    from orchestrace.learn.datasets import load_route
    from orchestrace.learn.envs.delegate import DelegateEnv, cost_scale

    t0 = time.process_time()
    write_trained(out / "delegate", train_delegate("mmlu", a.lam, seed=a.seed))
    train_cpu = time.process_time() - t0
    pol = load_policy(str(out / "delegate" / "delegate-mmlu"))
    full = load_route("mmlu")
    tr_idx, te_idx = split(len(full.ids))
    train_d, test_d = full.subset(tr_idx), full.subset(te_idx)
    scale = cost_scale(train_d)
    env = DelegateEnv(test_d, lam=a.lam, scale=scale)
    n = min(a.queries, len(test_d.ids))
    agree, live_r, off_r, t_decide = 0, [], [], []
    for q in range(n):
        cfg = {"question": test_d.texts[q], "group": test_d.groups[q], "models": full.models,
               "question_id": test_d.ids[q]}  # fmt: skip
        path = str(out / "route" / f"{q}.events.jsonl")
        run(
            "route",
            path,
            config=cfg,
            backend=ScriptedBackend(choices=["A"]),
            trace_policies={"delegate": pol},
        )
        tr = load_one(path)
        t = time.perf_counter()
        pol.decide(tr)
        t_decide.append(time.perf_counter() - t)
        ret = next(e for e in tr.events if e.type == "return")
        live = full.models.index((ret.agent or "").removeprefix("model:"))
        off = pol.policy.act(env.feats[q])
        agree += live == off
        live_r.append(test_d.quality[q, live] - a.lam * test_d.cost[q, live] / scale)
        off_r.append(test_d.quality[q, off] - a.lam * test_d.cost[q, off] / scale)
    lr, orr = np.array(live_r), np.array(off_r)
    return {
        "queries": n, "lambda": a.lam, "split_seed": SPLIT_SEED, "train_cpu_s": round(train_cpu, 1),
        "agreement": agree / n,
        "reward_live": {"mean": round(float(lr.mean()), 4), "ci95": _ci(lr)},
        "reward_offline": {"mean": round(float(orr.mean()), 4), "ci95": _ci(orr)},
        "decide_ms_median": round(1000 * float(np.median(t_decide)), 3),
    }  # fmt: skip


def spawn(a: argparse.Namespace, out: Path) -> dict:
    from orchestrace.learn.envs.swarm import SwarmEnv, swarm_reward, swarm_trace

    t0 = time.process_time()
    write_trained(out / "swarm", train_swarm(seed=a.seed, iters=a.swarm_iters, eval_tasks=10))
    train_cpu = time.process_time() - t0
    pol = load_policy(str(out / "swarm" / "swarm"))
    env = SwarmEnv(pol.cfg, task_seed=SWARM_TEST_SEED)
    stages_cmp = stages_agree = 0
    live_perf, off_perf, crit_live, t_decide = [], [], [], []
    for i in range(a.tasks):
        task = env.task(i)
        path = str(out / "swarm-runs" / f"{i}.events.jsonl")
        run("swarm", path, config={"stages": task.stages, "task_id": task.id},
            backend={"kind": "scripted", "seed": 0}, trace_policies={"spawn": pol})  # fmt: skip
        tr = load_one(path)
        decs = [(j, e) for j, e in enumerate(tr.events)
                if e.type == "orchestrator_decision" and (e.attrs or {}).get("decision") == "should_spawn"]  # fmt: skip
        live_ks = [int((e.attrs or {})["value"]) for _, e in decs]
        for j, _ in decs:
            prefix = msgspec.structs.replace(tr, events=tr.events[:j], edges=[])
            t = time.perf_counter()
            pol.decide(prefix)
            t_decide.append(time.perf_counter() - t)
        obs, _ = env.reset(options={"task": i})
        off_ks, done = [], False
        while not done:
            k = pol.policy.act(obs)
            off_ks.append(k)
            obs, _, done, _, info = env.step(k)
        stages_cmp += len(off_ks)
        stages_agree += sum(x == y for x, y in zip(off_ks, live_ks, strict=False))
        off_perf.append(swarm_reward(info["trace"])["r_perf"])
        live_perf.append(swarm_reward(swarm_trace(task, live_ks, pol.cfg)[0])["r_perf"])
        crit_live.append(critical_steps(tr)["critical"])
    lp, op = np.array(live_perf), np.array(off_perf)
    return {
        "tasks": a.tasks, "test_task_seed": SWARM_TEST_SEED, "train_iters": a.swarm_iters,
        "train_cpu_s": round(train_cpu, 1), "stages_compared": stages_cmp,
        "width_agreement": stages_agree / stages_cmp,
        "r_perf_live_widths": {"mean": round(float(lp.mean()), 4), "ci95": _ci(lp)},
        "r_perf_offline": {"mean": round(float(op.mean()), 4), "ci95": _ci(op)},
        "live_trace_critical_steps": round(float(np.mean(crit_live)), 2),
        "decide_ms_median": round(1000 * float(np.median(t_decide)), 3),
    }  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--lam", type=float, default=0.1)
    ap.add_argument("--swarm-iters", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=["delegate", "spawn"], default=None)
    ap.add_argument("-o", "--out", default="runs/bench/decisions_live")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res = {}
    if a.only in (None, "delegate"):
        res["delegate"] = delegate(a, out)
        print(json.dumps({"delegate": res["delegate"]}, indent=1), flush=True)
    if a.only in (None, "spawn"):
        res["spawn"] = spawn(a, out)
        print(json.dumps({"spawn": res["spawn"]}, indent=1), flush=True)
    (out / "result.json").write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
