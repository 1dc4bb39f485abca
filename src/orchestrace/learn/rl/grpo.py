"""GRPO for the StopVote stop decision: group-relative advantages, no critic.

A group is G episodes that share a prompt: the same question and the same worker samples in
the same order (forks of one trace prefix), so rewards within a group differ only through the
stop decisions. ``group_by="question"`` instead groups different orders of the same question.
Each episode's advantage is its trace reward minus the group mean (not divided by the group std,
as in Dr. GRPO; ``scale_std=True`` restores it); every decision of the episode shares it. The update is the
PPO-clipped surrogate (no KL term, as in Dr. GRPO / DAPO).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..envs.stopvote import EpisodePool, rollout
from ..stopping.policy import PolicyConfig, StopPolicy
from .common import Adam, TrainResult, clip_grad, end_iteration, log_probs, make_actor, prob_fn

if TYPE_CHECKING:
    from .rollouts import Batch


@dataclass
class Args:
    iterations: int = 80
    questions: int = 32  # groups per iteration
    group: int = 8  # episodes per group
    group_by: str = "episode"  # "episode" (forks of one sample order) or "question"
    scale_std: bool = False  # divide by the group std (original GRPO) or not (Dr. GRPO)
    epochs: int = 2
    lr: float = 1e-2  # advantages are not std-normalised, so they are small
    clip: float = 0.2
    entropy: float = 0.003
    max_grad_norm: float = 0.5
    eval_every: int = 5
    trace_frac: float = 0.25
    threads: int = 1
    seed: int = 0


def group_advantages(rewards: np.ndarray, group: int, scale: bool = False) -> np.ndarray:
    """r - mean_g within consecutive groups of ``group`` episodes (Dr. GRPO); with ``scale``,
    divided by std_g as in the original GRPO. The std division turns a group whose rewards differ
    only by a few samples' cost into advantages of +-1 and drives the policy to stop at once."""
    r = rewards.reshape(-1, group)
    adv = r - r.mean(1, keepdims=True)
    if scale:
        adv = adv / (r.std(1, keepdims=True) + 1e-6)
    return adv.reshape(-1)


def train(
    pool: EpisodePool,
    cost: float,
    args: Args = Args(),
    config: PolicyConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    config = config or PolicyConfig(budget=pool.budget, cost=cost)
    config.algorithm, config.seed, config.cost = "grpo", args.seed, cost
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor = make_actor(config, args.seed)
    opt = Adam(actor.parameters(), lr=args.lr)
    n_q = len(pool.bank.questions)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        qs = rng.integers(n_q, size=args.questions)
        if args.group_by == "episode":
            orders = np.repeat(rng.integers(pool.perms, size=(args.questions, 1)), args.group, axis=1)
        else:
            orders = rng.integers(pool.perms, size=(args.questions, args.group))
        eps = (qs[:, None] * pool.perms + orders).reshape(-1)
        ro = rollout(pool, prob_fn(actor), eps, rng, cost, trace_frac=args.trace_frac)
        adv_ep = group_advantages(ro.reward, args.group, args.scale_std)
        m = ro.mask
        obs = torch.from_numpy(pool.feats[eps][m])
        act = torch.from_numpy(ro.actions[m].astype(np.float32))
        adv = torch.from_numpy(np.broadcast_to(adv_ep[:, None], m.shape)[m].astype(np.float32))
        with torch.no_grad():
            old_logp, _ = log_probs(actor, obs, act)
        for _ in range(args.epochs):
            logp, ent = log_probs(actor, obs, act)
            ratio = torch.exp(logp - old_logp)
            surr = torch.min(ratio * adv, torch.clamp(ratio, 1 - args.clip, 1 + args.clip) * adv)
            loss = -surr.mean() - args.entropy * ent.mean()
            opt.zero_grad()
            loss.backward()
            clip_grad(opt.params, args.max_grad_norm)
            opt.step()
        end_iteration(
            history,
            it,
            float(ro.reward.mean()),
            pool=pool,
            actor=actor,
            cost=cost,
            iterations=args.iterations,
            eval_every=args.eval_every,
            progress=progress,
        )
    return TrainResult(StopPolicy.from_torch(config, actor), history)


# ---------------------------------------------------------------- Gymnasium / PettingZoo envs
# (the clipped update is PPO's: ``ppo.clipped_update``)


def gym_group_advantages(b: Batch, group: int, scale: str = "batch") -> np.ndarray:
    """Per decision: its episode's reward minus the mean over the group of rollouts of the same
    start, divided by the group's std (``scale="group"``, the original GRPO), by the std over the
    whole batch (``"batch"``: keeps a group whose rewards differ by a few cents small next to one
    whose answers differ in quality) or not at all (``"none"``, Dr. GRPO)."""
    gid = b.rollout // group
    n = np.bincount(gid)
    mean = np.bincount(gid, weights=b.ep_reward) / n
    adv = b.ep_reward - mean[gid]
    if scale == "group":
        adv = adv / (np.sqrt(np.bincount(gid, weights=adv**2) / n)[gid] + 1e-6)
    out = np.repeat(adv, b.decisions).astype(np.float32)
    return out / (out.std() + 1e-8) if scale == "batch" and len(out) > 1 else out
