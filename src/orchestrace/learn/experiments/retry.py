"""RetryStop (O5, a stop decision): train and evaluate when to give up retrying, on the public Reflexion / Game-of-24 outcomes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..rl.rollouts import NumpyPolicy, run_episode
from ..rl.train_gym import train_policy
from .common import SPLIT_SEED, algo_kwargs, paired_ci, policy_files, split, summary, write_result


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
    "exact": {"lr": 3e-2},  # REINFORCE's rate (not tuned)
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
    :mod:`~orchestrace.learn.rl.reinforce`) from an initial P(give up) of 0.12
    per decision (a policy that quits at once never sees late successes); held-out evaluation
    against every fixed retry cap (the cap chosen on the training split, and the best cap in
    hindsight). ``lr``, ``group``, ``ent_coef``: default per algorithm (:data:`RETRY_ALGO`)."""
    from ..datasets import load_retry
    from ..envs.retry import RetryStopEnv

    kw = algo_kwargs(RETRY_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef)
    result: dict[str, Any] = {"env": "RetryStop", "seed": seed, "split_seed": SPLIT_SEED, "families": {},
                              "algo": {"name": algo, **kw}}  # fmt: skip
    files: list[str] = []
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
        files += policy_files(out, f"retry-{fam}", res.policy)
        # cap chosen on the training split
        train_eval = _retry_eval(env, train_eps, res.policy, seed)
        cap_train = max(train_eval["caps"], key=lambda k: train_eval["caps"][k][0].mean())
        r = _retry_report(env, _retry_episodes(env, te, perms), res.policy, seed, cap_train)
        r.update(
            cost=c, tasks_train=len(tr), tasks_heldout=len(te), train_iters=iters,
            learning_curve=[c["batch_reward"] for c in res.history],
        )  # fmt: skip
        result["families"][fam] = r
    write_result(out, "retry-result.json", result, files)
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
            "reward": summary(lr, seed),
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
