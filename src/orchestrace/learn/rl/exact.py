"""Exact policy gradient over stopping times (REINFORCE, Rao-Blackwellised over the actions).

In StopVote the worker samples are exogenous: whatever the policy does, the next sample of a
replayed episode is fixed. So for one episode the policy's expected reward is a closed form,
    J(e) = sum_t P(stop at t) r(e, t),   P(stop at t) = p_t prod_{i<t} (1 - p_i),
with r(e, t) the trace reward of stopping after decision t (checked against freshly built
traces on a share of episodes) and p_t the policy's stop probability at decision t (the last
decision is a forced stop). Its gradient is the REINFORCE gradient with the expectation over the
policy's own actions taken exactly, so the only noise left is which episodes are drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ..envs.stopvote import EpisodePool, rollout
from ..stopping.policy import PolicyConfig, StopPolicy
from .common import Adam, TrainResult, end_iteration, make_actor, prob_fn


@dataclass
class Args:
    iterations: int = 120
    batch: int = 256  # episodes per iteration
    lr: float = 5e-3
    eval_every: int = 10
    trace_check: int = 16  # episodes whose rewards are re-read from traces, on checked iterations
    # iterations between trace checks: building traces cost a third of the main job when every
    # iteration checked; the episodes' random draws are the same either way (same policies)
    trace_check_every: int = 40
    threads: int = 1
    seed: int = 0


def stop_distribution(p: torch.Tensor) -> torch.Tensor:
    """[N, D] stop probabilities per decision -> P(the episode stops at decision t)."""
    p = torch.cat([p[:, :-1], torch.ones_like(p[:, -1:])], dim=1)  # forced stop at the budget
    survive = torch.cumprod(torch.cat([torch.ones_like(p[:, :1]), 1 - p[:, :-1]], dim=1), dim=1)
    return survive * p


def train(
    pool: EpisodePool,
    cost: float,
    args: Args = Args(),
    config: PolicyConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    config = config or PolicyConfig(budget=pool.budget, cost=cost)
    config.algorithm, config.seed, config.cost = "exact-pg", args.seed, cost
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor = make_actor(config, args.seed, init_stop=0.3)
    opt = Adam(actor.parameters(), lr=args.lr)
    reward = (pool.correct - cost * pool.costcum).astype(np.float32)  # [E, D] reward of stopping at t
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        eps = rng.integers(pool.episodes, size=args.batch)
        if args.trace_check:  # the arrays must agree with rewards read from traces
            checked = it % args.trace_check_every == 0
            rollout(pool, prob_fn(actor), eps[: args.trace_check], rng, cost, trace_frac=float(checked))
        x = torch.from_numpy(pool.feats[eps])
        p = torch.sigmoid(actor(x).squeeze(-1))
        dist = stop_distribution(p)
        j = (dist * torch.from_numpy(reward[eps])).sum(1).mean()
        opt.zero_grad()
        (-j).backward()
        opt.step()
        end_iteration(
            history,
            it,
            float(j.detach()),
            pool=pool,
            actor=actor,
            cost=cost,
            iterations=args.iterations,
            eval_every=args.eval_every,
            progress=progress,
        )
    return TrainResult(StopPolicy.from_torch(config, actor), history)
