"""REINFORCE, PPO and GRPO over one loop, for the RetryStop / Delegate / Swarm Gymnasium envs and
the PettingZoo Parallel Swarm (one policy shared by every agent).

CleanRL-style. Every env pays its reward once, at the end, read from the episode's trace
(``env.step`` computes it from ``info["trace"]``); the loop only ever sees that number. Each
iteration draws ``batch // group`` episode starts (options) from the training items, plays each
``group`` times with the current policy (numpy, :func:`~.rollouts.collect`) and updates:

* ``reinforce``: :func:`~.reinforce.gym_update` (learned value, group-mean or
  stop-now baseline), one gradient step per batch;
* ``ppo``: GAE(lambda) with gamma = 1 over a learned critic (reward R at the last decision, 0
  before), clipped surrogate + value loss + entropy bonus, ``epochs`` x ``minibatches`` steps;
* ``grpo``: the ``group`` rollouts of one start (same task/query, env reset with the same options
  and seed) form a group; every decision of an episode gets ``R - mean_g``, scaled by a std;
  clipped surrogate + entropy bonus, no critic (``adv_scale``: see :func:`~.grpo.gym_group_advantages`).

For a PettingZoo ``ParallelEnv`` every agent's trajectory is an episode of the batch (its reward
is the one the env hands that agent, read from the trace: the team reward or its own credit); the policy and
critic are shared by all agents (parameter sharing, independent policy gradient) and a GRPO group
holds every agent of the ``group`` rollouts of one start.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...core.errors import OrchestraceError
from .grpo import gym_group_advantages
from .ppo import clipped_update, gym_gae
from .reinforce import gym_update
from .rollouts import Batch, PolicyMeta, TrainResult, collect, collect_parallel, mlp, to_numpy

ALGOS = ("reinforce", "ppo", "grpo")


def check_algo(algo: str) -> None:
    if algo not in ALGOS:
        raise OrchestraceError("OT650", f"unknown algorithm {algo!r} (one of {', '.join(ALGOS)})")


def _spaces(env: Any) -> tuple[int, int, Callable[..., Batch]]:
    """(obs dim, actions, rollout function) of a Gymnasium env or a PettingZoo ParallelEnv."""
    from pettingzoo import ParallelEnv

    if isinstance(env, ParallelEnv):
        a = env.possible_agents[0]
        return int(env.observation_space(a).shape[0]), int(env.action_space(a).n), collect_parallel
    return int(env.observation_space.shape[0]), int(env.action_space.n), collect


def train_policy(
    algo: str,
    env: Any,
    train_options: Sequence[dict[str, Any]],
    *,
    env_name: str,
    iters: int = 150,
    batch: int = 64,
    lr: float = 3e-3,
    hidden: Sequence[int] = (32,),
    ent_coef: float = 0.01,
    vf_coef: float = 0.5,
    seed: int = 0,
    group: int = 1,
    baseline: str = "value",
    epochs: int = 4,
    minibatches: int = 4,
    clip: float = 0.2,
    gae_lambda: float = 0.95,
    adv_scale: str = "batch",
    init_bias: Sequence[float] | None = None,
    on_iter: Callable[[int], None] | None = None,
    progress: bool = False,
    extra: dict[str, Any] | None = None,
) -> TrainResult:
    """Train a softmax policy with ``algo`` on episodes drawn (with replacement) from
    ``train_options``; ``group`` rollouts per drawn start (GRPO's group size; REINFORCE's
    group-mean baseline when > 1; PPO ignores grouping in its advantages).
    ``baseline``, ``vf_coef`` (REINFORCE): see :func:`~.reinforce.gym_update`.
    ``init_bias``: initial action logits. ``on_iter(i)`` runs before iteration i collects (used to
    anneal reward weights). Same seed, same policy."""
    import torch

    from .common import Adam

    check_algo(algo)
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    obs_dim, n_act, rollout = _spaces(env)
    meta = PolicyMeta(env_name, obs_dim, n_act, list(hidden), seed, {"algo": algo, **(extra or {})})
    actor = mlp([obs_dim, *hidden, n_act])
    critic = mlp([obs_dim, *hidden, 1]) if algo != "grpo" else None
    with torch.no_grad():
        actor[-1].weight.mul_(0.01)  # near-uniform start
        if init_bias is not None:
            actor[-1].bias.copy_(torch.tensor(list(init_bias), dtype=torch.float32))
    params = [*actor.parameters(), *(critic.parameters() if critic is not None else [])]
    opt = Adam(params, lr=lr)
    curve: list[dict[str, float]] = []
    bar = None
    if progress:
        from tqdm import tqdm

        # piped stderr: no bar (its redraws would make one endless line), one line at the end
        bar = tqdm(total=iters, desc=f"train {env_name} ({algo})", unit="it", disable=None)
    env.reset(seed=seed)
    for it in range(iters):
        if on_iter is not None:
            on_iter(it)
        pick = np.repeat(rng.integers(len(train_options), size=max(1, batch // group)), group)
        b = rollout(env, to_numpy(actor, meta), [train_options[i] for i in pick], rng)
        if len(b.act):
            if algo == "reinforce":
                gym_update(actor, critic, opt, b, group, baseline, vf_coef, ent_coef)
            elif algo == "ppo":
                assert critic is not None
                with torch.no_grad():
                    v = critic(torch.from_numpy(b.obs))[:, 0].numpy()
                adv = gym_gae(v, b.ep_reward, b.decisions, gae_lambda)
                clipped_update(actor, critic, opt, b, adv, adv + v, rng, epochs=epochs, minibatches=minibatches,
                               clip=clip, ent_coef=ent_coef, vf_coef=vf_coef, norm_adv=True)  # fmt: skip
            else:
                adv = gym_group_advantages(b, group, adv_scale)
                clipped_update(actor, None, opt, b, adv, None, rng, epochs=epochs, minibatches=minibatches,
                               clip=clip, ent_coef=ent_coef, vf_coef=0.0, norm_adv=False)  # fmt: skip
        curve.append({"iter": it, "reward": float(b.ep_reward.mean()), "decisions": float(len(b.act))})
        if bar is not None:
            bar.set_postfix(reward=f"{b.ep_reward.mean():.3f}")
            bar.update()
    if bar is not None:
        bar.close()
        if bar.disable:
            print(f"train {env_name} ({algo}): {iters} iterations", file=sys.stderr)
    return TrainResult(to_numpy(actor, meta), curve)
