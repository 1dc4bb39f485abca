"""PPO (clipped surrogate, GAE, separate critic) for the StopVote stop decision.

Per-decision rewards come from the episode's trace reward R: continuing from decision t to t+1
earns -c x (cost of the samples drawn in between), stopping earns the rest of R (the team
reward). gamma = 1; GAE(lambda) over the value critic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..envs.stopvote import EpisodePool, rollout
from ..stopping.policy import PolicyConfig, StopPolicy
from .common import (
    Adam,
    TrainResult,
    clip_grad,
    end_iteration,
    log_probs,
    make_actor,
    make_critic,
    prob_fn,
)

if TYPE_CHECKING:
    from .rollouts import Batch


@dataclass
class Args:
    iterations: int = 60
    batch: int = 256  # episodes per iteration
    epochs: int = 4
    minibatches: int = 4
    lr: float = 3e-3
    critic_lr: float = 1e-2
    clip: float = 0.2
    gae_lambda: float = 0.95
    entropy: float = 0.003
    max_grad_norm: float = 0.5
    eval_every: int = 5
    trace_frac: float = 0.25
    threads: int = 1
    seed: int = 0


def step_rewards(rtg: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-decision rewards whose sum from t on equals the reward-to-go at t."""
    nxt = np.concatenate([rtg[:, 1:], np.zeros((len(rtg), 1))], axis=1)
    last = mask & ~np.concatenate([mask[:, 1:], np.zeros((len(mask), 1), bool)], axis=1)
    return np.where(last, rtg, rtg - nxt) * mask


def gae(rewards: np.ndarray, values: np.ndarray, mask: np.ndarray, lam: float) -> np.ndarray:
    """Generalised advantage estimation with gamma = 1 over masked decision sequences."""
    n, d = rewards.shape
    adv = np.zeros((n, d))
    run = np.zeros(n)
    for t in range(d - 1, -1, -1):
        nxt_v = values[:, t + 1] * mask[:, t + 1] if t + 1 < d else np.zeros(n)
        delta = rewards[:, t] + nxt_v - values[:, t]
        nxt_adv = run * (mask[:, t + 1] if t + 1 < d else 0)
        run = np.where(mask[:, t], delta + lam * nxt_adv, 0.0)
        adv[:, t] = run
    return adv


def train(
    pool: EpisodePool,
    cost: float,
    args: Args = Args(),
    config: PolicyConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    config = config or PolicyConfig(budget=pool.budget, cost=cost)
    config.algorithm, config.seed, config.cost = "ppo", args.seed, cost
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
        feats = pool.feats[eps]
        with torch.no_grad():
            values = critic(torch.from_numpy(feats)).squeeze(-1).numpy()
            old_logp, _ = log_probs(
                actor, torch.from_numpy(feats), torch.from_numpy(ro.actions.astype(np.float32))
            )
        rew = step_rewards(ro.reward_to_go, ro.mask)
        adv = gae(rew, values, ro.mask, args.gae_lambda)
        ret = adv + values
        m = ro.mask
        obs = torch.from_numpy(feats[m])
        act = torch.from_numpy(ro.actions[m].astype(np.float32))
        b_old = old_logp[torch.from_numpy(m)]
        b_adv = torch.from_numpy(adv[m].astype(np.float32))
        b_ret = torch.from_numpy(ret[m].astype(np.float32))
        n = len(obs)
        for _ in range(args.epochs):
            perm = torch.from_numpy(rng.permutation(n))
            for idx in perm.chunk(args.minibatches):
                if len(idx) < 2:
                    continue
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                logp, ent = log_probs(actor, obs[idx], act[idx])
                ratio = torch.exp(logp - b_old[idx])
                surr = torch.min(ratio * a, torch.clamp(ratio, 1 - args.clip, 1 + args.clip) * a)
                loss = -surr.mean() - args.entropy * ent.mean()
                opt.zero_grad()
                loss.backward()
                clip_grad(opt.params, args.max_grad_norm)
                opt.step()
                v_loss = ((critic(obs[idx]).squeeze(-1) - b_ret[idx]) ** 2).mean()
                opt_v.zero_grad()
                v_loss.backward()
                clip_grad(opt_v.params, args.max_grad_norm)
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
# (RetryStop, Delegate, Swarm, the Parallel Swarm: rollouts in ``rollouts.py``, the loop in ``train_gym.py``)


def gym_gae(values: np.ndarray, ep_reward: np.ndarray, decisions: np.ndarray, lam: float) -> np.ndarray:
    """GAE(lambda), gamma = 1, per episode: reward R at its last decision, 0 before, V = 0 after."""
    adv = np.zeros(len(values), np.float32)
    end = 0
    for n, r_ep in zip(decisions.tolist(), ep_reward.tolist(), strict=True):
        end += n
        run, v_next, r = 0.0, 0.0, r_ep
        for t in range(end - 1, end - n - 1, -1):
            run = r + v_next - values[t] + lam * run
            adv[t], v_next, r = run, values[t], 0.0
    return adv


def clipped_update(actor: Any, critic: Any | None, opt: Any, b: Batch, adv: np.ndarray, ret: np.ndarray | None,
                   rng: np.random.Generator, *, epochs: int, minibatches: int, clip: float, ent_coef: float,
                   vf_coef: float, norm_adv: bool, max_grad_norm: float = 0.5,
                   old_logp: np.ndarray | None = None) -> None:  # fmt: skip
    """PPO-clip epochs over the batch (the critic's squared error joins the loss when given).
    ``old_logp``: log-probabilities of the actions under the policy that took them, when that was
    not ``actor`` (recorded runs); the ratio then corrects for the policy that collected the data."""
    obs, act = torch.from_numpy(b.obs), torch.from_numpy(b.act)
    adv_t = torch.from_numpy(adv)
    ret_t = torch.from_numpy(ret) if ret is not None else None
    if old_logp is not None:
        old = torch.from_numpy(np.asarray(old_logp, np.float32))
    else:
        with torch.no_grad():
            old = torch.log_softmax(actor(obs), -1).gather(1, act[:, None])[:, 0]
    for _ in range(epochs):
        for idx in torch.from_numpy(rng.permutation(len(act))).chunk(minibatches):
            if len(idx) < 2:
                continue
            logp_all = torch.log_softmax(actor(obs[idx]), -1)
            ratio = torch.exp(logp_all.gather(1, act[idx, None])[:, 0] - old[idx])
            a = adv_t[idx]
            if norm_adv:
                a = (a - a.mean()) / (a.std() + 1e-8)
            pg = -torch.min(ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a).mean()
            ent = -(logp_all.exp() * logp_all).sum(-1).mean()
            loss = pg - ent_coef * ent
            if critic is not None and ret_t is not None:
                loss = loss + vf_coef * ((critic(obs[idx])[:, 0] - ret_t[idx]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            clip_grad(opt.params, max_grad_norm)
            opt.step()
