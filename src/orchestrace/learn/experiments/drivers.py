"""Train and evaluate RetryStop, Delegate and Swarm; every function returns JSON-able results.

Protocol (all three): a seeded split into training and held-out items (tasks, queries, task
DAGs), training only sees the training split, every number in a result is measured on the held-out
split with a percentile bootstrap CI over items, and the seeds are part of the result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ...core.errors import OrchestraceError
from ..rl.gym_pg import check_algo, train_policy
from ..rl.gym_reinforce import NumpyPolicy, bootstrap_ci, paired_ci, run_episode

SPLIT_SEED = 0


def split(n: int, frac: float = 0.6, seed: int = SPLIT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, held-out) index split."""
    idx = np.random.default_rng(seed).permutation(n)
    k = int(round(n * frac))
    return np.sort(idx[:k]), np.sort(idx[k:])


def _summary(x: np.ndarray, seed: int) -> dict[str, Any]:
    lo, hi = bootstrap_ci(x, seed=seed)
    return {"mean": float(np.mean(x)), "ci95": [lo, hi]}


def _algo_kw(defaults: dict[str, dict[str, Any]], algo: str, **given: Any) -> dict[str, Any]:
    """The env's default hyperparameters for ``algo``, overridden by the ``given`` ones not None."""
    check_algo(algo)
    return {**defaults[algo], **{k: v for k, v in given.items() if v is not None}}


def _write(out: str | Path | None, name: str, result: dict[str, Any]) -> None:
    if out is None:
        return
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(json.dumps(result, indent=2) + "\n")


# ============================================================================ RetryStop


def _retry_episodes(env: Any, idx: np.ndarray, perms: int) -> list[dict[str, int]]:
    from ..envs.retry import EXCHANGEABLE

    out = []
    for i in idx.tolist():
        k = perms if env.tasks[i].family in EXCHANGEABLE else 1
        out += [{"task": i, "perm": p} for p in range(k)]
    return out


def _retry_eval(env: Any, episodes: list[dict[str, int]], policy: NumpyPolicy, seed: int) -> dict[str, Any]:
    """Greedy policy and every fixed cap on the same held-out episodes."""
    from ..envs.retry import fixed_cap_reward

    rew, succ, att = [], [], []
    for opt in episodes:
        _, _, r, info = run_episode(env, policy.act, opt)
        rew.append(r)
        succ.append(info["success"])
        att.append(info["attempts"])
    fam = env.tasks[episodes[0]["task"]].family
    budget = env.budget[fam]
    caps = {}
    for k in range(1, budget + 1):
        res = [
            fixed_cap_reward(env.view(o["task"], o["perm"]), k, env.cost, env.unit[fam], budget)
            for o in episodes
        ]
        caps[k] = (
            np.array([r for r, _, _ in res]),
            np.array([s for _, s, _ in res]),
            np.array([n for _, _, n in res]),
        )
    return {"learned": (np.array(rew), np.array(succ), np.array(att)), "caps": caps}


def _by_task(episodes: list[dict[str, int]], x: np.ndarray) -> np.ndarray:
    """Average permutations of the same task so that the bootstrap resamples tasks."""
    tasks = np.array([o["task"] for o in episodes])
    return np.array([x[tasks == t].mean() for t in np.unique(tasks)])


#: Default price of one attempt, in successes: an ALFWorld trial or a HumanEval round is a whole
#: agent episode; a Game-of-24 attempt is one GPT-4 sample. (Every ALFWorld environment succeeds
#: by trial 15, so below c ~ 0.15 "never give up" is optimal and there is nothing to learn.)
RETRY_COST = {"alfworld": 0.25, "humaneval": 0.1, "game24": 0.01, "game24-standard": 0.01}
#: Per-algorithm defaults (GRPO: 8 rollouts of the same task and sample order per group).
RETRY_ALGO: dict[str, dict[str, Any]] = {
    "reinforce": {"lr": 3e-2, "group": 1, "ent_coef": 0.01},
    "ppo": {"lr": 1e-2, "group": 1, "ent_coef": 0.01},
    "grpo": {"lr": 1e-2, "group": 8, "ent_coef": 0.01, "adv_scale": "group"},
}


def train_retry(
    families: Sequence[str] = ("alfworld", "humaneval", "game24"),
    cost: float | None = None,
    *,
    seed: int = 0,
    iters: int = 150,
    batch: int = 64,
    perms: int = 8,
    hidden: Sequence[int] = (),
    algo: str = "reinforce",
    lr: float | None = None,
    group: int | None = None,
    ent_coef: float | None = None,
    out: str | Path | None = None,
    data: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """One policy (logistic by default: few tasks, few features) per family on 60% of its tasks,
    trained with ``algo`` (REINFORCE: the stop-now baseline, see
    :func:`~orchestrace.learn.rl.gym_reinforce.reinforce_update`) from an initial P(give up) of 0.12
    per decision (a policy that quits at once never sees late successes); held-out evaluation
    against every fixed retry cap (the cap chosen on the training split, and the best cap in
    hindsight). ``lr``, ``group``, ``ent_coef``: default per algorithm (:data:`RETRY_ALGO`)."""
    from ..datasets import load_retry
    from ..envs.retry import RetryStopEnv

    kw = _algo_kw(RETRY_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef)
    result: dict[str, Any] = {"env": "RetryStop", "seed": seed, "split_seed": SPLIT_SEED, "families": {},
                              "algo": {"name": algo, **kw}}  # fmt: skip
    for fam in families:
        tasks = load_retry(fam, data)
        c = RETRY_COST.get(fam, 0.05) if cost is None else cost
        env = RetryStopEnv(tasks, cost=c)
        tr, te = split(len(tasks))
        train_eps = _retry_episodes(env, tr, perms)
        res = train_policy(
            algo, env, train_eps, env_name="RetryStop", iters=iters, batch=batch, seed=seed, progress=progress,
            hidden=hidden, init_bias=(0.0, -2.0), baseline="stop-now", extra={"family": fam, "cost": c}, **kw,
        )  # fmt: skip
        if out is not None:
            res.policy.save(Path(out) / f"retry-{fam}")
        # cap chosen on the training split
        train_eval = _retry_eval(env, train_eps, res.policy, seed)
        cap_train = max(train_eval["caps"], key=lambda k: train_eval["caps"][k][0].mean())
        r = _retry_report(env, _retry_episodes(env, te, perms), res.policy, seed, cap_train)
        r.update(
            cost=c, tasks_train=len(tr), tasks_heldout=len(te), train_iters=iters,
            learning_curve=[c["reward"] for c in res.curve],
        )  # fmt: skip
        result["families"][fam] = r
    _write(out, "retry-result.json", result)
    return result


def _retry_report(
    env: Any, eps: list[dict[str, int]], policy: NumpyPolicy, seed: int, cap_train: int
) -> dict:
    ev = _retry_eval(env, eps, policy, seed)
    lr, ls, la = (_by_task(eps, x.astype(float)) for x in ev["learned"])
    caps = {k: tuple(_by_task(eps, x.astype(float)) for x in v) for k, v in ev["caps"].items()}
    best = max(caps, key=lambda k: caps[k][0].mean())
    d_train, lo_t, hi_t = paired_ci(lr, caps[cap_train][0], seed=seed)
    d_best, lo_b, hi_b = paired_ci(lr, caps[best][0], seed=seed)
    return {
        "episodes_heldout": len(eps),
        "learned": {
            "reward": _summary(lr, seed),
            "success": float(ls.mean()),
            "mean_attempts": float(la.mean()),
        },
        "cap_chosen_on_train": cap_train,
        "cap_best_in_hindsight": best,
        "fixed_caps": {
            str(k): {
                "reward": float(v[0].mean()),
                "success": float(v[1].mean()),
                "mean_attempts": float(v[2].mean()),
            }
            for k, v in caps.items()
        },
        "learned_minus_train_cap": {"mean": d_train, "ci95": [lo_t, hi_t]},
        "learned_minus_hindsight_cap": {"mean": d_best, "ci95": [lo_b, hi_b]},
    }


def eval_retry(
    policy: str | Path, family: str, cost: float | None = None, *, perms: int = 8, seed: int = 0,
    data: str | Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A saved RetryStop policy on the held-out split of ``family`` (any family: transfer works
    because the features are task-agnostic), against every fixed cap."""
    from ..datasets import load_retry
    from ..envs.retry import RetryStopEnv

    pol = NumpyPolicy.load(policy, env="RetryStop")
    c = float(pol.meta.extra.get("cost", 0.02)) if cost is None else cost
    tasks = load_retry(family, data)
    env = RetryStopEnv(tasks, cost=c)
    tr, te = split(len(tasks))
    train_eval = _retry_eval(env, _retry_episodes(env, tr, perms), pol, seed)
    cap_train = max(train_eval["caps"], key=lambda k: train_eval["caps"][k][0].mean())
    r = _retry_report(env, _retry_episodes(env, te, perms), pol, seed, cap_train)
    r.update(env="RetryStop", family=family, cost=c, seed=seed, trained_on=pol.meta.extra.get("family"))
    return r


def _need_choice(name: str, value: str, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise OrchestraceError("OT665", f"unknown {name} {value!r} (one of {', '.join(allowed)})")


# ============================================================================ Delegate


def _route_methods(train: Any, test: Any, lam: float, scale: float) -> tuple[dict[str, np.ndarray], float]:
    """Per-query choices of the one-call baselines on ``test``: each single model, the threshold
    router (tau tuned on train) and the hindsight oracle."""
    from ..envs.delegate import route_rewards, threshold_router

    out: dict[str, np.ndarray] = {}
    for j, m in enumerate(test.models):
        out[f"single:{m}"] = np.full(len(test.ids), j)
    best_tau, best_r = 0.0, -np.inf
    for tau in np.linspace(0.0, 1.0, 41):
        route = threshold_router(train, float(tau))
        r = route_rewards(train, np.array([route(g) for g in train.groups]), lam, scale)[0].mean()
        if r > best_r:
            best_tau, best_r = float(tau), r
    route = threshold_router(train, best_tau)
    out["threshold_router"] = np.array([route(g) for g in test.groups])
    out["oracle"] = (test.quality - lam * test.cost / scale).argmax(axis=1)
    return out, best_tau


def _run_env(env: Any, n: int, choose: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(reward, quality, cost, calls) per query of a policy played through the env's traces."""
    out = np.zeros((4, n))
    for i in range(n):
        _, _, r, info = run_episode(env, choose, {"query": i})
        out[:, i] = r, info["quality"], info["cost_usd"], info.get("calls", 1)
    return out[0], out[1], out[2], out[3]


def _delegate_report(train: Any, test: Any, lam: float, scale: float, policy: NumpyPolicy | None,
                     test_env: Any, seed: int) -> dict[str, Any]:  # fmt: skip
    from ..envs.delegate import CascadeEnv, route_rewards, rule_cascade

    choices, tau = _route_methods(train, test, lam, scale)
    per = {k: (*route_rewards(test, v, lam, scale), np.ones(len(v))) for k, v in choices.items()}
    shares = {k: {m: float(np.mean(v == j)) for j, m in enumerate(test.models)} for k, v in choices.items()}
    if isinstance(test_env, CascadeEnv):
        per["rule_cascade"] = _run_env(test_env, len(test.ids), rule_cascade)
    if policy is not None:
        per["learned"] = _run_env(test_env, len(test.ids), policy.act)
    train_single = {
        m: route_rewards(train, np.full(len(train.ids), j), lam, scale)[0].mean()
        for j, m in enumerate(train.models)
    }
    best_single = "single:" + max(train_single, key=train_single.get)  # type: ignore[arg-type]
    methods = {}
    for k, (r, q, c, calls) in per.items():
        methods[k] = {
            "reward": _summary(r, seed),
            "quality": float(q.mean()),
            "usd_per_1k_queries": float(c.mean() * 1000),
            "quality_per_dollar": float(q.mean() / c.mean()) if c.mean() > 0 else None,
            "calls_per_query": float(calls.mean()),
        }
        if k in shares:
            methods[k]["share"] = shares[k]
    res: dict[str, Any] = {
        "lambda": lam, "cost_scale_usd": scale, "queries_heldout": len(test.ids), "queries_train": len(train.ids),
        "best_single_model": best_single, "threshold_tau": tau, "methods": methods,
    }  # fmt: skip
    if "learned" in per:
        for base in (best_single, "threshold_router"):
            d, lo, hi = paired_ci(per["learned"][0], per[base][0], seed=seed)
            res[f"learned_minus_{base.split(':')[0]}"] = {"mean": d, "ci95": [lo, hi]}
        lq, lc = per["learned"][1].mean(), per["learned"][2].mean()
        bq, bc = per[best_single][1].mean(), per[best_single][2].mean()
        res["vs_best_single"] = {
            "quality_diff": float(lq - bq),
            "cost_ratio": float(lc / bc) if bc > 0 else None,
            "quality_per_dollar_ratio": float((lq / lc) / (bq / bc))
            if lc > 0 and bc > 0 and bq > 0
            else None,
        }
    return res


#: Per-algorithm defaults (``ent_coef`` defaults per mode: 0.02 route, 0.05 cascade). GRPO here
#: is Dr. GRPO (no std division): a group whose answers are all right differs only by price, and
#: dividing by its std would weigh a few cents like a wrong answer.
DELEGATE_ALGO: dict[str, dict[str, Any]] = {
    "reinforce": {"lr": 3e-3, "group": 4},
    "ppo": {"lr": 1e-3, "group": 1},
    "grpo": {"lr": 3e-3, "group": 4, "adv_scale": "none", "epochs": 2, "minibatches": 1},
}


def train_delegate(
    source: str = "mmlu",
    lam: float = 0.1,
    *,
    seed: int = 0,
    iters: int = 200,
    batch: int = 256,
    algo: str = "reinforce",
    group: int | None = None,
    ent_coef: float | None = None,
    hidden: Sequence[int] = (64,),
    lr: float | None = None,
    models: Sequence[str] | None = None,
    mode: str = "route",
    out: str | Path | None = None,
    data: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """``mode="route"``: one model per query; ``mode="cascade"`` (GSM8K: needs logged answers):
    ask the cheapest model first and decide from its answer whether to escalate.

    Router trained with ``algo`` on 60% of the queries (REINFORCE and GRPO: each drawn query
    routed ``group`` times, the group mean reward as baseline: the advantage compares models on
    the same query; ``lr``, ``group`` default per algorithm, :data:`DELEGATE_ALGO`); held-out
    comparison with every single model, the cost-threshold router and the hindsight oracle."""
    from ..datasets import ROUTE_SOURCES, load_route
    from ..envs.delegate import CascadeEnv, DelegateEnv

    _need_choice("source", source, ROUTE_SOURCES)
    _need_choice("mode", mode, ("route", "cascade"))
    ent = (0.05 if mode == "cascade" else 0.02) if ent_coef is None else ent_coef
    kw = _algo_kw(DELEGATE_ALGO, algo, lr=lr, group=group, ent_coef=ent)
    full = load_route(source, data, list(models) if models else None)
    if mode == "cascade" and full.responses is None:
        raise OrchestraceError("OT665", f"cascade mode needs logged answers; {source} has none (use gsm8k)")
    tr, te = split(len(full.ids))
    train_d, test_d = full.subset(tr), full.subset(te)
    make = CascadeEnv if mode == "cascade" else DelegateEnv
    env = make(train_d, lam=lam, scale=None)
    scale = env.scale
    res = train_policy(
        algo, env, [{"query": i} for i in range(len(train_d.ids))], env_name="Delegate", iters=iters,
        batch=batch, seed=seed, hidden=hidden, progress=progress, **kw,
        init_bias=(1.0, 0.0) if mode == "cascade" else None,  # cascade: start cheap, accept (P = 0.73)
        extra={"source": source, "lambda": lam, "models": full.models, "cost_scale": scale, "mode": mode},
    )  # fmt: skip
    suffix = "-cascade" if mode == "cascade" else ""
    if out is not None:
        res.policy.save(Path(out) / f"delegate-{source}{suffix}")
    test_env = make(test_d, lam=lam, scale=scale)
    r = _delegate_report(train_d, test_d, lam, scale, res.policy, test_env, seed)
    r.update(
        env="Delegate", mode=mode, source=source, seed=seed, split_seed=SPLIT_SEED, models=full.models,
        price_source=full.price_source, train_iters=iters, learning_curve=[c["reward"] for c in res.curve],
        algo={"name": algo, **kw},
    )  # fmt: skip
    _write(out, f"delegate-{source}{suffix}-result.json", r)
    return r


def eval_delegate(
    source: str = "mmlu", policy: str | Path | None = None, lam: float | None = None, *, seed: int = 0,
    data: str | Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Held-out comparison; without ``policy`` only the baselines and the oracle are reported."""
    from ..datasets import ROUTE_SOURCES, load_route
    from ..envs.delegate import CascadeEnv, DelegateEnv, cost_scale

    _need_choice("source", source, ROUTE_SOURCES)
    pol = NumpyPolicy.load(policy, env="Delegate") if policy is not None else None
    models = pol.meta.extra.get("models") if pol is not None else None
    full = load_route(source, data, models)
    if pol is not None and list(models or []) != full.models:
        raise OrchestraceError("OT665", f"policy routes among {models}, the data has {full.models}")
    lam_ = lam if lam is not None else float(pol.meta.extra.get("lambda", 0.1)) if pol is not None else 0.1
    tr, te = split(len(full.ids))
    train_d, test_d = full.subset(tr), full.subset(te)
    scale = cost_scale(train_d)
    mode = pol.meta.extra.get("mode", "route") if pol is not None else "route"
    test_env = (CascadeEnv if mode == "cascade" else DelegateEnv)(test_d, lam=lam_, scale=scale)
    r = _delegate_report(train_d, test_d, lam_, scale, pol, test_env, seed)
    r.update(
        env="Delegate",
        mode=mode,
        source=source,
        seed=seed,
        models=full.models,
        price_source=full.price_source,
    )
    return r


# ============================================================================ Swarm

SWARM_TRAIN_SEED, SWARM_TEST_SEED = 0, 1  # task generators: held-out DAGs come from another seed


def _swarm_run(env: Any, i: int, choose: Any) -> dict[str, Any]:
    _, _, _, info = run_episode(env, choose, {"task": i})
    return info


def _swarm_eval(env: Any, n: int, methods: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every method on held-out tasks 0..n-1; Critical Steps measured on the trace."""
    from ..envs.swarm import swarm_reward

    out = {}
    for name, choose in methods.items():
        rows = []
        for i in range(n):
            info = _swarm_run(env, i, choose)
            m = swarm_reward(info["trace"], parallel_cap=env.cfg.parallel_cap, measure=True)
            rows.append([m["r_perf"], m["r_parallel"], m["r_finish"], m["critical_steps"] / info["serial_critical"],
                         float(not info["late"]), info["spawned"] / info["stages_run"], m["critical_steps"],
                         info["serial_critical"]])  # fmt: skip
        a = np.array(rows)
        out[name] = {
            "r_perf": _summary(a[:, 0], seed),
            "r_parallel": float(a[:, 1].mean()),
            "finish_rate": float(a[:, 2].mean()),
            "critical_over_serial": _summary(a[:, 3], seed),
            "on_budget": float(a[:, 4].mean()),
            "spawned_per_stage": float(a[:, 5].mean()),
            "critical_steps": float(a[:, 6].mean()),
            "serial_critical_steps": float(a[:, 7].mean()),
            "_r_perf": a[:, 0],
        }
    return out


def _swarm_methods(env: Any, policy: NumpyPolicy | None) -> dict[str, Any]:
    from ..envs.swarm import BASELINES, baseline_ks

    def fixed(name: str) -> Any:
        def choose(_obs: np.ndarray) -> int:
            ks = baseline_ks(name, env._task, env.cfg)
            return ks[len(env._ks)]

        return choose

    methods: dict[str, Any] = {} if policy is None else {"learned": policy.act}
    methods.update({b: fixed(b) for b in BASELINES})
    return methods


def _swarm_report(env: Any, policy: NumpyPolicy | None, n: int, seed: int) -> dict[str, Any]:
    ev = _swarm_eval(env, n, _swarm_methods(env, policy), seed)
    res: dict[str, Any] = {"tasks_heldout": n, "methods": {}}
    for k, v in ev.items():
        res["methods"][k] = {kk: vv for kk, vv in v.items() if not kk.startswith("_")}
    if policy is not None:
        for base in ("serial", "makespan_heuristic", "max_agents"):
            d, lo, hi = paired_ci(ev["learned"]["_r_perf"], ev[base]["_r_perf"], seed=seed)
            res[f"learned_minus_{base}_r_perf"] = {"mean": d, "ci95": [lo, hi]}
    return res


#: Per-algorithm defaults (REINFORCE and GRPO: every drawn DAG played ``group`` times).
SWARM_ALGO: dict[str, dict[str, Any]] = {
    "reinforce": {"lr": 1e-2, "group": 8, "ent_coef": 0.1},
    "ppo": {"lr": 3e-3, "group": 1, "ent_coef": 0.1},
    "grpo": {"lr": 3e-3, "group": 8, "ent_coef": 0.1, "adv_scale": "group"},
}


def _swarm_train(env: Any, algo: str, kw: dict[str, Any], *, seed: int, iters: int, batch: int, l1: float,
                 l2: float, anneal_frac: float, train_tasks: int, progress: bool,
                 extra: dict[str, Any]) -> tuple[Any, list[tuple[float, float]]]:  # fmt: skip
    """Train on PARL rewards with l1 (r_parallel) and l2 (r_finish) decaying linearly to 0 over the
    first ``anneal_frac`` of the iterations (Swarm and the PettingZoo Parallel Swarm alike)."""
    from ...reward.schedule import Schedule

    steps = max(1, int(iters * anneal_frac))
    s1 = Schedule(kind="linear", start=l1, end=0.0, steps=steps)
    s2 = Schedule(kind="linear", start=l2, end=0.0, steps=steps)
    weights: list[tuple[float, float]] = []

    def anneal(it: int) -> None:
        env.set_weights(s1(it), s2(it))
        weights.append((s1(it), s2(it)))

    res = train_policy(
        algo, env, [{"task": i} for i in range(train_tasks)], env_name="Swarm", iters=iters, batch=batch, seed=seed,
        hidden=(32,), on_iter=anneal, progress=progress,
        extra={"l1": l1, "l2": l2, "anneal_frac": anneal_frac, "config": vars(env.cfg), **extra}, **kw,
    )  # fmt: skip
    return res, weights[:: max(1, iters // 20)]


def train_swarm(
    *,
    seed: int = 0,
    iters: int = 300,
    batch: int = 64,
    l1: float = 0.2,
    l2: float = 1.0,
    anneal_frac: float = 0.8,
    algo: str = "reinforce",
    group: int | None = None,
    ent_coef: float | None = None,
    lr: float | None = None,
    train_tasks: int = 2000,
    eval_tasks: int = 200,
    out: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """``algo`` on PARL rewards with annealed l1, l2 (see :func:`_swarm_train`); REINFORCE and
    GRPO play every drawn DAG ``group`` times and use the group mean as the baseline (tasks differ
    a lot in how tight their budget is), and a strong entropy bonus keeps small spawn counts
    explored (defaults per algorithm: :data:`SWARM_ALGO`). Evaluation on DAGs from another seed."""
    from ..envs.swarm import SwarmEnv

    kw = _algo_kw(SWARM_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef)
    env = SwarmEnv(task_seed=SWARM_TRAIN_SEED, l1=l1, l2=l2)
    res, weights = _swarm_train(env, algo, kw, seed=seed, iters=iters, batch=batch, l1=l1, l2=l2,
                                anneal_frac=anneal_frac, train_tasks=train_tasks, progress=progress, extra={})  # fmt: skip
    if out is not None:
        res.policy.save(Path(out) / "swarm")
    test_env = SwarmEnv(task_seed=SWARM_TEST_SEED)
    r = _swarm_report(test_env, res.policy, eval_tasks, seed)
    r.update(
        env="Swarm", seed=seed, train_task_seed=SWARM_TRAIN_SEED, test_task_seed=SWARM_TEST_SEED,
        config=vars(env.cfg), train_iters=iters, anneal={"l1": l1, "l2": l2, "frac": anneal_frac},
        algo={"name": algo, **kw, "batch": batch}, learning_curve=[c["reward"] for c in res.curve], weights=weights,
    )  # fmt: skip
    _write(out, "swarm-result.json", r)
    return r


def train_swarm_parallel(
    *,
    seed: int = 0,
    iters: int = 200,
    batch: int = 32,
    branches: int = 3,
    l1: float = 0.2,
    l2: float = 1.0,
    anneal_frac: float = 0.8,
    algo: str = "reinforce",
    group: int | None = None,
    ent_coef: float | None = None,
    lr: float | None = None,
    train_tasks: int = 2000,
    eval_tasks: int = 100,
    credit: str = "team",
    out: str | Path | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """PettingZoo Parallel Swarm, trained through ``parallel_env``'s reset/step with a dict of
    actions: one policy (and critic) shared by every lead (parameter sharing, independent policy
    gradient), each lead's reward the team PARL reward R of the episode's trace (``credit="team"``)
    or its own credit from that trace (``"loo"``, ``"difference"``, ``"shapley"`` at the agent
    unit, a lead's unit being its branch; R - sum of the leads' credits is spread equally, so the
    leads' rewards sum to R: :func:`~..envs.swarm_parallel.lead_rewards`). ``batch`` counts
    env episodes (each gives ``branches`` agent trajectories). Evaluated with
    :func:`eval_swarm_parallel` on held-out tasks against the per-lead fixed rules."""
    from ..envs.swarm_parallel import check_credit, parallel_env

    check_credit(credit)
    kw = _algo_kw(SWARM_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef)
    env = parallel_env(branches=branches, task_seed=SWARM_TRAIN_SEED, l1=l1, l2=l2, credit=credit)
    res, weights = _swarm_train(env, algo, kw, seed=seed, iters=iters, batch=batch, l1=l1, l2=l2,
                                anneal_frac=anneal_frac, train_tasks=train_tasks, progress=progress,
                                extra={"trained_on": "SwarmParallel", "branches": branches, "credit": credit})  # fmt: skip
    if out is not None:
        res.policy.save(Path(out) / "swarm-parallel")
    r = eval_swarm_parallel(res.policy, branches=branches, eval_tasks=eval_tasks, seed=seed)
    r.update(
        seed=seed, train_task_seed=SWARM_TRAIN_SEED, test_task_seed=SWARM_TEST_SEED, config=vars(env.cfg),
        train_iters=iters, anneal={"l1": l1, "l2": l2, "frac": anneal_frac}, algo={"name": algo, **kw, "batch": batch},
        credit=credit, learning_curve=[c["reward"] for c in res.curve], weights=weights,
    )  # fmt: skip
    _write(out, "swarm-parallel-result.json", r)
    return r


def eval_swarm(policy: str | Path | None = None, *, eval_tasks: int = 200, seed: int = 0) -> dict[str, Any]:
    """Held-out DAGs: a saved policy (if given) and every baseline, with measured Critical Steps."""
    from ..envs.swarm import SwarmEnv

    pol = NumpyPolicy.load(policy, env="Swarm") if policy is not None else None
    r = _swarm_report(SwarmEnv(task_seed=SWARM_TEST_SEED), pol, eval_tasks, seed)
    r.update(env="Swarm", seed=seed, test_task_seed=SWARM_TEST_SEED)
    return r


def eval_swarm_parallel(
    policy: str | Path | NumpyPolicy | None = None, *, branches: int = 3, eval_tasks: int = 100, seed: int = 0
) -> dict[str, Any]:
    """PettingZoo Parallel Swarm on held-out tasks: every lead acts at once, each running the same
    policy (trained on the single-agent Swarm, or shared by the leads in :func:`train_swarm_parallel`)
    on its own observation, against per-lead baselines."""
    from ..envs.swarm import baseline_ks, swarm_reward
    from ..envs.swarm_parallel import SwarmParallelEnv, hier_stage_critical

    pol = NumpyPolicy.load(policy, env="Swarm") if isinstance(policy, str | Path) else policy
    env = SwarmParallelEnv(branches=branches, task_seed=SWARM_TEST_SEED)

    def rule(name: str) -> Any:
        def choose(agent: str, _obs: np.ndarray) -> int:
            b = env.possible_agents.index(agent)
            return baseline_ks(name, env._tasks[b], env.cfg)[env._s]

        return choose

    methods: dict[str, Any] = {"makespan_heuristic": rule("makespan_heuristic"), "serial": rule("serial"),
                               "max_agents": rule("max_agents")}  # fmt: skip
    if pol is not None:
        methods = {"learned_per_lead": lambda _a, o: pol.act(o), **methods}
    out: dict[str, Any] = {
        "env": "SwarmParallel",
        "branches": branches,
        "tasks_heldout": eval_tasks,
        "methods": {},
    }
    for name, choose in methods.items():
        rows = []
        for i in range(eval_tasks):
            obs, _ = env.reset(options={"task": i})
            while env.agents:
                obs, _, _, _, infos = env.step({a: choose(a, obs[a]) for a in env.agents})
            info = next(iter(infos.values()))
            m = swarm_reward(info["trace"], parallel_cap=env.cfg.parallel_cap, measure=True)
            serial = sum(
                hier_stage_critical([t.stages[s] for t in env._tasks], [0] * branches) for s in range(env._n)
            )
            rows.append(
                [m["r_perf"], m["r_finish"], m["critical_steps"] / (serial + 1), float(not info["late"])]
            )
        a = np.array(rows)
        out["methods"][name] = {"r_perf": _summary(a[:, 0], seed), "finish_rate": float(a[:, 1].mean()),
                                "critical_over_serial": float(a[:, 2].mean()), "on_budget": float(a[:, 3].mean())}  # fmt: skip
    return out
