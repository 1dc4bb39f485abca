"""RetryStop (O5, a stop decision): train and evaluate when to give up retrying, on the public Reflexion / Game-of-24 outcomes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from ..rl.rollouts import NumpyPolicy, run_episode
from ..rl.train_gym import train_policy
from .protocol import (
    SPLIT_SEED,
    AlgoSettings,
    MeanCI,
    Trained,
    algo_kwargs,
    need_numbers,
    paired_summary,
    policy_number,
    split,
    summary,
)

if TYPE_CHECKING:
    from ..envs.retry import RetryStopEnv


class RetryLearned(msgspec.Struct):
    """The learned policy on the held-out tasks (per task: permutations averaged)."""

    reward: MeanCI
    success: float
    mean_attempts: float


class RetryCap(msgspec.Struct):
    """A fixed retry cap (give up after k attempts) on the same held-out tasks."""

    reward: float
    success: float
    mean_attempts: float


class RetryReport(msgspec.Struct):
    """The held-out comparison of a RetryStop policy with every fixed cap (keys: the cap, as text)."""

    episodes_heldout: int
    learned: RetryLearned
    cap_chosen_on_train: int
    cap_best_in_hindsight: int
    fixed_caps: dict[str, RetryCap]
    learned_minus_train_cap: MeanCI
    learned_minus_hindsight_cap: MeanCI


class RetryFamily(RetryReport):
    """One family of ``train retry``: the held-out report, the split and the learning curve."""

    cost: float
    tasks_train: int
    tasks_heldout: int
    train_iters: int
    learning_curve: list[float]


class RetryTraining(msgspec.Struct, omit_defaults=True):
    """``train retry``: one policy per family; ``files_written`` once :func:`write_trained` saved it."""

    env: str
    seed: int
    split_seed: int
    families: dict[str, RetryFamily]
    algo: AlgoSettings
    files_written: list[str] | None = None


class RetryEval(RetryReport):
    """``eval retry``: a saved policy on one family (``trained_on``: the family it learned on)."""

    env: str
    family: str
    cost: float
    seed: int
    trained_on: str | None


def _retry_episodes(env: RetryStopEnv, idx: np.ndarray, perms: int) -> list[dict[str, int]]:
    from ..envs.retry import EXCHANGEABLE

    out = []
    for i in idx.tolist():
        k = perms if env.tasks[i].family in EXCHANGEABLE else 1
        out += [{"task": i, "perm": p} for p in range(k)]
    return out


#: Per episode: reward, success, attempts.
Outcomes = tuple[np.ndarray, np.ndarray, np.ndarray]


def _retry_eval(
    env: RetryStopEnv, episodes: list[dict[str, int]], policy: NumpyPolicy, seed: int
) -> tuple[Outcomes, dict[int, Outcomes]]:
    """Greedy policy and every fixed cap (by cap) on the same held-out episodes."""
    from ..envs.retry import fixed_cap_reward

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
    return _retry_learned(env, episodes, policy), caps


def _retry_learned(env: RetryStopEnv, episodes: list[dict[str, int]], policy: NumpyPolicy) -> Outcomes:
    """The greedy policy's outcomes, episode by episode."""
    rew, succ, att = [], [], []
    for opt in episodes:
        _, _, r, info = run_episode(env, policy.act, opt)
        rew.append(r)
        succ.append(info["success"])
        att.append(info["attempts"])
    return np.array(rew), np.array(succ), np.array(att)


def _heldout_figures(
    env: RetryStopEnv, episodes: list[dict[str, int]]
) -> Callable[[NumpyPolicy], dict[str, float]]:
    """A give-up policy's mean reward, success and attempts on held-out episodes: what ``--log``
    shows under ``heldout/`` while it trains."""

    def measure(policy: NumpyPolicy) -> dict[str, float]:
        reward, success, attempts = _retry_learned(env, episodes, policy)
        return {"reward": float(reward.mean()), "success": float(success.mean()),
                "attempts": float(attempts.mean())}  # fmt: skip

    return measure


def _by_task(episodes: list[dict[str, int]], x: np.ndarray) -> np.ndarray:
    """Average permutations of the same task so that the bootstrap resamples tasks."""
    tasks = np.array([o["task"] for o in episodes])
    return np.array([x[tasks == t].mean() for t in np.unique(tasks)])


#: Default price of one attempt, in successes: an ALFWorld trial or a HumanEval round is a whole
#: agent episode; a Game-of-24 attempt is one GPT-4 sample. (Every ALFWorld environment succeeds
#: by trial 15, so below c ~ 0.15 "never give up" is optimal and there is nothing to learn.)
RETRY_COST = {"alfworld": 0.25, "humaneval": 0.1, "game24": 0.01, "game24-standard": 0.01}
#: Per-algorithm defaults (GRPO: 8 rollouts of the same task and sample order per group).
RETRY_ALGO: dict[str, AlgoSettings] = {
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
    data: str | Path | None = None,
    target_kl: float | None = None,
    progress: bool = False,
) -> Trained[RetryTraining]:
    """One policy (logistic by default: few tasks, few features) per family on 60% of its tasks,
    trained with ``algo`` (REINFORCE: the stop-now baseline, see
    :mod:`~orchestrace.learn.rl.reinforce`) from an initial P(give up) of 0.12
    per decision (a policy that quits at once never sees late successes); held-out evaluation
    against every fixed retry cap (the cap chosen on the training split, and the best cap in
    hindsight). ``lr``, ``group``, ``ent_coef``: default per algorithm (:data:`RETRY_ALGO`).
    :func:`~.common.write_trained` saves the policies (``retry-<family>``) and the result."""
    from ..datasets import load_retry
    from ..envs.retry import RetryStopEnv

    need_numbers(cost=cost, iters_count=iters)
    kw = algo_kwargs(RETRY_ALGO, algo, lr=lr, group=group, ent_coef=ent_coef, target_kl=target_kl)
    by_family: dict[str, RetryFamily] = {}
    policies: dict[str, NumpyPolicy] = {}
    for fam in families:
        tasks = load_retry(fam, data)
        c = RETRY_COST.get(fam, 0.05) if cost is None else cost
        env = RetryStopEnv(tasks, cost=c)
        tr, te = split(len(tasks))
        train_eps = _retry_episodes(env, tr, perms)
        held_env = RetryStopEnv(tasks, cost=c)  # its own: measuring never touches the training env
        res = train_policy(
            algo, env, train_eps, env_name="RetryStop", iters=iters, batch=batch, seed=seed, progress=progress,
            hidden=hidden, init_bias=(0.0, -2.0), baseline="stop-now", extra={"family": fam, "cost": c}, **kw,
            heldout=_heldout_figures(held_env, _retry_episodes(held_env, te, perms)), run=f"RetryStop-{fam}-{algo}",
        )  # fmt: skip
        policies[f"retry-{fam}"] = res.policy
        # cap chosen on the training split
        _, train_caps = _retry_eval(env, train_eps, res.policy, seed)
        cap_train = max(train_caps, key=lambda k: train_caps[k][0].mean())
        r = _retry_report(env, _retry_episodes(env, te, perms), res.policy, seed, cap_train)
        by_family[fam] = RetryFamily(
            **msgspec.structs.asdict(r), cost=c, tasks_train=len(tr), tasks_heldout=len(te), train_iters=iters,
            learning_curve=[c["batch_reward"] for c in res.history],
        )  # fmt: skip
    result = RetryTraining("RetryStop", seed, SPLIT_SEED, by_family, {"name": algo, **kw})
    return Trained(result, "retry-result.json", policies)


def _retry_report(
    env: RetryStopEnv, eps: list[dict[str, int]], policy: NumpyPolicy, seed: int, cap_train: int
) -> RetryReport:
    learned, held_caps = _retry_eval(env, eps, policy, seed)
    lr, ls, la = (_by_task(eps, x.astype(float)) for x in learned)
    caps = {k: tuple(_by_task(eps, x.astype(float)) for x in v) for k, v in held_caps.items()}
    best = max(caps, key=lambda k: caps[k][0].mean())
    return RetryReport(
        episodes_heldout=len(eps),
        learned=RetryLearned(summary(lr, seed), float(ls.mean()), float(la.mean())),
        cap_chosen_on_train=cap_train,
        cap_best_in_hindsight=best,
        fixed_caps={
            str(k): RetryCap(float(v[0].mean()), float(v[1].mean()), float(v[2].mean()))
            for k, v in caps.items()
        },
        learned_minus_train_cap=paired_summary(lr, caps[cap_train][0], seed),
        learned_minus_hindsight_cap=paired_summary(lr, caps[best][0], seed),
    )


def eval_retry(
    policy: str | Path, family: str, cost: float | None = None, *, perms: int = 8, seed: int = 0,
    data: str | Path | None = None,
) -> RetryEval:  # fmt: skip
    """A saved RetryStop policy on the held-out split of ``family`` (any family: transfer works
    because the features are task-agnostic), against every fixed cap."""
    from ..datasets import load_retry
    from ..envs.retry import RetryStopEnv

    need_numbers(cost=cost)
    pol = NumpyPolicy.load(policy, env="RetryStop")
    c = policy_number(pol, "cost", 0.02, policy) if cost is None else cost
    tasks = load_retry(family, data)
    env = RetryStopEnv(tasks, cost=c)
    tr, te = split(len(tasks))
    _, train_caps = _retry_eval(env, _retry_episodes(env, tr, perms), pol, seed)
    cap_train = max(train_caps, key=lambda k: train_caps[k][0].mean())
    r = _retry_report(env, _retry_episodes(env, te, perms), pol, seed, cap_train)
    return RetryEval(
        **msgspec.structs.asdict(r), env="RetryStop", family=family, cost=c, seed=seed,
        trained_on=pol.meta.extra.get("family"),
    )  # fmt: skip
