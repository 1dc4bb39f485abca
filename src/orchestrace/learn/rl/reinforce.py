"""REINFORCE with a baseline, on any env (:mod:`.tasks`: StopVote's pool or a Gymnasium /
PettingZoo env).

Each iteration plays a batch of episodes, reads every episode's reward from its trace and pushes
up log pi(a_t|s_t) * A_t with A_t = G_t - b_t, where G_t is the decision's return (``Batch.ret``:
the episode reward; on StopVote the reward-to-go, the cost already paid excluded since it does not
depend on the action). One gradient step per batch:

    loss = -mean(A_t * log pi(a_t|s_t)) + vf_coef * mean((G_t - V(s_t))^2) - entropy * mean(H(pi(.|s_t)))

Baselines: ``value``: b_t = V(s_t), a critic fit by regression; with ``group > 1`` the mean
reward of the ``group`` rollouts of the same start replaces V (removes the between-item
variance, e.g. easy vs hard tasks). ``stop-now`` (stopping envs): b_t = the reward of stopping at
t in this very episode, read from the replayed samples or attempts. These are exogenous (drawn
independently of the action at t), so the gradient stays unbiased while question difficulty and
sunk costs drop out: stopping gets advantage 0, continuing gets exactly what the later samples
bought. The critic is fitted in every case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .curve import TrainResult, record
from .distribution import log_probs
from .optim import clip_grad, optimiser, parameters
from .rollouts import agent_figures
from .tasks import Task


@dataclass
class Args:
    iterations: int = 150
    batch: int = 256  # episodes per iteration
    group: int = 1  # rollouts per drawn start (> 1: the group-mean baseline)
    lr: float = 3e-3
    critic_lr: float | None = 1e-2  # None: lr
    vf_coef: float = 1.0
    entropy: float = 0.003
    baseline: str = "value"  # or "stop-now"
    max_grad_norm: float | None = None  # None: no clipping
    eval_every: int = 10
    threads: int = 1
    seed: int = 0


def train(task: Task, args: Args = Args(), progress: Callable[[int], None] | None = None) -> TrainResult:
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor, critic = task.networks(args.seed, critic=True)
    assert critic is not None
    opt = optimiser(actor, critic, args.lr, args.critic_lr)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        b = task.play(actor, task.starts(it, rng, args.batch, args.group), rng)
        figures: dict[str, float] = {}
        if len(b.act):
            x = torch.from_numpy(b.obs)
            r = torch.from_numpy(b.ret.astype(np.float32))
            v = critic(x)[:, 0]
            if args.baseline == "stop-now":
                adv = r - torch.from_numpy(b.stop_now)
                adv = adv / (adv.std() + 1e-8) if len(adv) > 1 else adv  # keep advantage 0 at 0
            else:
                if args.group > 1:
                    assert b.rollout is not None
                    gid = b.rollout // args.group
                    mean = np.bincount(gid, weights=b.ep_reward) / np.bincount(gid)
                    adv = r - torch.from_numpy(np.repeat(mean[gid], b.decisions).astype(np.float32))
                else:
                    adv = (r - v).detach()
                adv = (adv - adv.mean()) / (adv.std() + 1e-8) if len(adv) > 1 else adv
            logp, ent = log_probs(actor, x, torch.from_numpy(b.act))
            loss = -(adv * logp).mean() + args.vf_coef * ((r - v) ** 2).mean() - args.entropy * ent.mean()
            opt.zero_grad()
            loss.backward()
            clip_grad(parameters(opt), args.max_grad_norm)
            opt.step()
            figures = {"entropy": float(ent.detach().mean()), **agent_figures(b, adv.detach().numpy())}
        record(history, it, float(b.ep_reward.mean()), task, actor, iterations=args.iterations,
               eval_every=args.eval_every, progress=progress, figures=figures)  # fmt: skip
    return TrainResult(task.policy(actor, "reinforce", args.seed), history)
