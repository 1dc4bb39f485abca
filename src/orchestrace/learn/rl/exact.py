"""Exact policy gradient (REINFORCE, Rao-Blackwellised over the actions), on envs whose outcomes
do not depend on the action taken before them (:meth:`.tasks.Task.has_outcome_table`).

Stopping over replayed samples (StopVote, RetryStop): whatever the policy does, the next sample of
a replayed episode is fixed. So for one episode the policy's expected reward is a closed form,
    J(e) = sum_t P(stop at t) r(e, t),   P(stop at t) = p_t prod_{i<t} (1 - p_i),
with r(e, t) the reward of stopping after decision t (StopVote: from the pool's arrays, checked
against freshly built traces on a share of episodes; RetryStop: read from the env at each
decision of a play that never stops) and p_t the policy's stop probability at decision t (the last
decision is a forced stop). One-step envs with an outcome table (Delegate routing):
J(q) = sum_a pi(a|q) r(q, a). The gradient is the REINFORCE gradient with the expectation over
the policy's own actions taken exactly, so the only noise left is which episodes are drawn. Envs
whose actions change what comes next (Swarm, the cascade) are refused (``OT650``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .common import TrainResult, action_probs, optimiser, record
from .tasks import OutcomeTable, Task, check_outcome_table


@dataclass
class Args:
    iterations: int = 120
    batch: int = 256  # episodes per iteration
    lr: float = 5e-3
    eval_every: int = 10
    threads: int = 1
    seed: int = 0


def stop_distribution(p: torch.Tensor) -> torch.Tensor:
    """[N, D] stop probabilities per decision -> P(the episode stops at decision t)."""
    p = torch.cat([p[:, :-1], torch.ones_like(p[:, -1:])], dim=1)  # forced stop at the budget
    survive = torch.cumprod(torch.cat([torch.ones_like(p[:, :1]), 1 - p[:, :-1]], dim=1), dim=1)
    return survive * p


def expected_reward(actor: torch.nn.Module, tab: OutcomeTable) -> torch.Tensor:
    """Mean over the table's episodes of the policy's expected reward."""
    logits = actor(torch.from_numpy(tab.obs))
    reward = torch.from_numpy(tab.reward)
    if tab.stop_action is None:  # one decision, every action ends the episode
        return (torch.softmax(logits, dim=-1) * reward).sum(-1).mean()
    p = action_probs(logits, tab.stop_action)
    if tab.ends is not None:  # episodes of different lengths: the forced end stops for certain
        p = torch.where(torch.arange(p.shape[1])[None, :] >= torch.from_numpy(tab.ends)[:, None], 1.0, p)
    return (stop_distribution(p) * reward).sum(1).mean()


def train(task: Task, args: Args = Args(), progress: Callable[[int], None] | None = None) -> TrainResult:
    check_outcome_table(task)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor, _ = task.networks(args.seed, critic=False)
    opt = optimiser(actor, None, args.lr, None)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        starts = task.starts(it, rng, args.batch, 1)
        j = expected_reward(actor, task.outcome_table(actor, starts, rng, it))
        opt.zero_grad()
        (-j).backward()
        opt.step()
        record(history, it, float(j.detach()), task, actor, iterations=args.iterations,
               eval_every=args.eval_every, progress=progress)  # fmt: skip
    return TrainResult(task.policy(actor, "exact-pg", args.seed), history)
