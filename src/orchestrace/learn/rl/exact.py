"""Exact policy gradient: REINFORCE with the expectation over the policy's own actions taken
exactly (Rao-Blackwellised over the actions), so the only noise left is which episodes are drawn.

Stopping over replayed samples (StopVote, RetryStop): whatever the policy does, the next sample of
a replayed episode is fixed. So for one episode the policy's expected reward is a closed form,
    J(e) = sum_t P(stop at t) r(e, t),   P(stop at t) = p_t prod_{i<t} (1 - p_i),
with r(e, t) the reward of stopping after decision t (StopVote: from the pool's arrays, checked
against freshly built traces on a share of episodes; RetryStop: read from the env at each
decision of a play that never stops) and p_t the policy's stop probability at decision t (the last
decision is a forced stop). One-step envs with an outcome table (Delegate routing):
J(q) = sum_a pi(a|q) r(q, a).

Envs whose actions change what comes next (Swarm, the Parallel Swarm, the Delegate cascade) are
deterministic given the episode's start and the actions, so J(e) is a sum over the episode's
action tree (:mod:`.tree`): J(e) = sum_leaf prod_{d on its path} pi(a_d|o_d) R(leaf).
Swarm (at most 9^4 = 6,561 leaves) and the cascade (one leaf per model it can stop at, plus
straight to the priciest) are enumerated whole: the gradient of J(e) is exact for each drawn
episode. The Parallel Swarm's joint choices grow as 9^(3 leads x stages) (3.9e8 for three
stages), so there only the last d stages are enumerated (d = 1 for 3 leads: 729 leaves) after a
prefix the policy plays: the estimate is V(prefix) + log P(prefix) (V(prefix) - b), V the exact
expected reward of the enumerated rest given the sampled prefix and b the batch's leave-one-out
mean of V: unbiased, exact over the last d stages' actions, REINFORCE over the prefix's. An
episode whose sampled prefix already ended it is one leaf. Trees beyond
:data:`~.tree.MAX_LEAVES` leaves, one stage of the Parallel Swarm included, are refused
(``OT650``, with the size). On trees an entropy bonus (``Args.entropy``, the mean entropy over the
trees' decision nodes; ``train_policy`` passes its ``ent_coef``) keeps a first action from locking
in before the later decisions are learned: without it the GSM8K cascade learned to go straight to
the priciest model (median P over the training queries 0.985 after 50 iterations, 0.997 after
200), so its accept / escalate decision stopped mattering and was never learned. The tables' closed forms run without one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from .curve import TrainResult, record
from .distribution import action_probs
from .optim import optimiser
from .tasks import OutcomeTable, Task, check_outcome_table
from .tree import ActionTree


@dataclass
class Args:
    iterations: int = 120
    batch: int = 256  # episodes per iteration
    lr: float = 5e-3
    eval_every: int = 10
    threads: int = 1
    seed: int = 0
    entropy: float = 0.0  # entropy bonus on action trees (the tables' closed forms have none)


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


def tree_objective(
    actor: torch.nn.Module, trees: list[ActionTree], entropy: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(surrogate, J): the surrogate's gradient is the estimator above (plus ``entropy`` x the
    mean entropy of the policy over the trees' decision nodes); J is the mean over the trees of the
    policy's expected reward of the enumerated part given the sampled prefix."""
    depth = max(t.node.shape[1] for t in trees)
    obs, node, act, rew, ep, pre, pre_act, pre_ep = [], [], [], [], [], [], [], []
    n = 0
    for e, t in enumerate(trees):
        pad = depth - t.node.shape[1]
        node.append(np.pad(np.where(t.node >= 0, t.node + n, -1), ((0, 0), (0, pad)), constant_values=-1))
        act.append(np.pad(t.act, ((0, 0), (0, pad))))
        obs.append(t.obs)
        rew.append(t.reward)
        ep.append(np.full(len(t.reward), e))
        pre.append(t.prefix + n)
        pre_act.append(t.prefix_act)
        pre_ep.append(np.full(len(t.prefix), e))
        n += len(t.obs)
    x = torch.from_numpy(np.concatenate(obs).astype(np.float32).reshape(n, -1))
    logp = torch.log_softmax(actor(x), dim=-1) if n else torch.zeros(0, 1)
    nd = torch.from_numpy(np.concatenate(node))
    on = nd >= 0
    lp = torch.where(on, logp[nd.clamp(min=0), torch.from_numpy(np.concatenate(act))], 0.0).sum(1)
    idx = torch.from_numpy(np.concatenate(ep))
    v = torch.zeros(len(trees)).index_add(0, idx, lp.exp() * torch.from_numpy(np.concatenate(rew)))
    bonus = -entropy * (logp.exp() * logp).sum(-1).mean() if entropy and n else 0.0
    pi = torch.from_numpy(np.concatenate(pre))
    if not len(pi):  # every tree whole: J itself
        return v.mean() + bonus, v.mean()
    pre_lp = torch.zeros(len(trees)).index_add(
        0, torch.from_numpy(np.concatenate(pre_ep)), logp[pi, torch.from_numpy(np.concatenate(pre_act))]
    )
    vd = v.detach()
    base = (vd.sum() - vd) / max(len(trees) - 1, 1)  # leave-one-out: independent of the episode's own prefix
    return (v + pre_lp * (vd - base)).mean() + bonus, v.mean()


def train(task: Task, args: Args = Args(), progress: Callable[[int], None] | None = None) -> TrainResult:
    check_outcome_table(task)
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(args.seed)
    actor, _ = task.networks(args.seed, critic=False)
    opt = optimiser(actor, None, args.lr, None)
    history: list[dict[str, float]] = []
    for it in range(args.iterations):
        starts = task.starts(it, rng, args.batch, 1)
        out = task.outcome_table(actor, starts, rng, it)
        if isinstance(out, OutcomeTable):
            surrogate = j = expected_reward(actor, out)
        else:
            surrogate, j = tree_objective(actor, out, args.entropy)
        opt.zero_grad()
        (-surrogate).backward()
        opt.step()
        record(history, it, float(j.detach()), task, actor, iterations=args.iterations,
               eval_every=args.eval_every, progress=progress)  # fmt: skip
    return TrainResult(task.policy(actor, "exact-pg", args.seed), history)
