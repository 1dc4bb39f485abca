"""REINFORCE with a learned state-value baseline, for the StopVote stop decision.

Each iteration runs a batch of episodes, reads every episode's reward from its trace and
pushes up log pi(a_t|s_t) * (G_t - b_t), where G_t is the reward from decision t on (the
cost already paid is excluded: it does not depend on the action).

Baselines: ``learned`` (default as published): b_t = V(s_t), a critic fit by regression.
``stop-now``: b_t = the reward of stopping at t in this very episode (its majority's
correctness minus cost), read from the replayed samples. The samples are exogenous (drawn
independently of the policy's action at t), so this baseline keeps the gradient unbiased while
removing question difficulty from the advantage: stopping gets advantage 0, continuing gets
exactly what the extra samples bought in this episode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..envs.stopvote import EpisodePool, rollout
from ..stopping.policy import PolicyConfig, StopPolicy
from .common import Adam, TrainResult, clip_grad, end_iteration, log_probs, make_actor, make_critic, prob_fn

if TYPE_CHECKING:
    from .rollouts import Batch


@dataclass
class Args:
    iterations: int = 150
    batch: int = 256  # episodes per iteration
    lr: float = 3e-3
    critic_lr: float = 1e-2
    entropy: float = 0.003
    baseline: str = "learned"  # or "stop-now"
    eval_every: int = 10
    trace_frac: float = 0.25  # share of episodes rewarded from a freshly built trace
    threads: int = 1
    seed: int = 0


def train(
    pool: EpisodePool,
    cost: float,
    args: Args = Args(),
    config: PolicyConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    config = config or PolicyConfig(budget=pool.budget, cost=cost)
    config.algorithm, config.seed, config.cost = "reinforce", args.seed, cost
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor = make_actor(config, args.seed)
    critic = make_critic(pool.feats.shape[-1], config.hidden, args.seed)
    opt = Adam(actor.parameters(), lr=args.lr)
    opt_v = Adam(critic.parameters(), lr=args.critic_lr)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        eps = rng.integers(pool.episodes, size=args.batch)
        ro = rollout(pool, prob_fn(actor), eps, rng, cost, trace_frac=args.trace_frac)
        obs = torch.from_numpy(pool.feats[eps][ro.mask])
        act = torch.from_numpy(ro.actions[ro.mask].astype(np.float32))
        ret = torch.from_numpy(ro.reward_to_go[ro.mask].astype(np.float32))
        if len(obs):
            v = critic(obs).squeeze(-1)
            if args.baseline == "stop-now":
                # in reward-to-go units the sunk cost cancels: stopping now is worth correct_t
                adv = ret - torch.from_numpy(pool.correct[eps][ro.mask].astype(np.float32))
            else:
                adv = ret - v.detach()
            adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(adv) > 1 else adv
            logp, ent = log_probs(actor, obs, act)
            loss = -(logp * adv).mean() - args.entropy * ent.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            v_loss = ((v - ret) ** 2).mean()
            opt_v.zero_grad()
            v_loss.backward()
            opt_v.step()
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


def gym_update(actor: Any, critic: Any, opt: Any, b: Batch, group: int, baseline: str, vf_coef: float,
                     ent_coef: float) -> None:  # fmt: skip
    """One REINFORCE step on a batch.

    ``baseline="value"``: ``A = R - V(s)`` (learned critic); with ``group > 1`` the mean reward of
    the ``group`` rollouts of the same start replaces V (removes the between-item variance, e.g.
    easy vs hard tasks). ``baseline="stop-now"`` (stopping envs with ``stop_now_reward()``): the
    advantage of a decision is R minus the reward of ending the episode right there, as in the
    StopVote REINFORCE: the future attempts are replayed, exogenous to the action, so the gradient
    stays unbiased; ending gets advantage 0 and continuing gets exactly what the later attempts
    bought (sunk costs and task difficulty drop out). The critic is fitted in every case."""
    x = torch.from_numpy(b.obs)
    r = torch.from_numpy(b.ret)
    logp_all = torch.log_softmax(actor(x), dim=-1)
    logp = logp_all.gather(1, torch.from_numpy(b.act)[:, None])[:, 0]
    v = critic(x)[:, 0]
    if baseline == "stop-now":
        adv = r - torch.from_numpy(b.stop_now)
        adv = adv / (adv.std() + 1e-8) if len(adv) > 1 else adv  # keep advantage 0 at 0
    else:
        if group > 1:
            gid = b.rollout // group
            mean = np.bincount(gid, weights=b.ep_reward) / np.bincount(gid)
            adv = r - torch.from_numpy(np.repeat(mean[gid], b.decisions).astype(np.float32))
        else:
            adv = (r - v).detach()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(adv) > 1 else adv
    ent = -(logp_all.exp() * logp_all).sum(-1).mean()
    loss = -(adv * logp).mean() + vf_coef * ((r - v) ** 2).mean() - ent_coef * ent
    opt.zero_grad()
    loss.backward()
    clip_grad(opt.params, 1.0)
    opt.step()
