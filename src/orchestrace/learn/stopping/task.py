"""StopVote as an :class:`~..rl.tasks.Task`: what the algorithms of ``rl`` train the stop policy on.

Episodes are rows of the precomputed :class:`~.pool.EpisodePool`, a batch is one forward pass
(``pool.rollout``); the policy is a :class:`~.policy.StopPolicy` (one logit, a Bernoulli stop
probability); the return of a decision is its reward-to-go; the learning curve carries a greedy
evaluation on the pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..rl.rollouts import Batch
from ..rl.tasks import OutcomeTable
from .policy import PolicyConfig, StopPolicy
from .pool import EpisodePool, rollout


def prob_fn(actor: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """numpy features -> stop probabilities, without gradients."""

    def f(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(actor(torch.from_numpy(x)).squeeze(-1)).numpy()

    return f


@dataclass
class PoolTask:
    """StopVote over a precomputed pool at sample cost ``cost``.

    ``trace_frac``: share of a batch's episodes rewarded from a freshly built trace (checked
    against the arrays). Exact PG re-reads ``trace_check`` episodes from traces every
    ``trace_check_every`` iterations (building traces cost a third of the main job when every
    iteration checked; the random draws are the same either way). ``group_by`` (groups of more
    than one rollout, GRPO): ``"episode"`` repeats one question in one sample order (forks of one
    trace prefix), ``"question"`` draws an order per rollout."""

    pool: EpisodePool
    cost: float
    config: PolicyConfig | None = None
    trace_frac: float = 0.25
    trace_check: int = 16
    trace_check_every: int = 40
    group_by: str = "episode"
    name: str = "StopVote"
    reward: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.config = self.config or PolicyConfig(budget=self.pool.budget, cost=self.cost)
        p = self.pool
        self.reward = (p.correct - self.cost * p.costcum).astype(np.float32)  # [E, D] reward of stopping at t

    def networks(self, seed: int, critic: bool) -> tuple[nn.Module, nn.Module | None]:
        """The actor starts at P(stop) = 0.3 everywhere, so early episodes run long enough to see
        what more samples buy."""
        assert self.config is not None
        torch.manual_seed(seed)
        actor = StopPolicy.init(self.config, seed).torch_actor()
        with torch.no_grad():
            actor[-1].bias.fill_(float(np.log(0.3 / 0.7)))
            actor[-1].weight.mul_(0.1)
        if not critic:
            return actor, None
        torch.manual_seed(seed + 1)
        layers: list[nn.Module] = []
        hidden = self.config.hidden
        for i, o in zip([self.pool.feats.shape[-1], *hidden], hidden, strict=False):
            layers += [nn.Linear(i, o), nn.Tanh()]
        layers.append(nn.Linear(hidden[-1], 1))
        return actor, nn.Sequential(*layers)

    def starts(self, it: int, rng: np.random.Generator, batch: int, group: int) -> np.ndarray:
        p = self.pool
        if group == 1:
            return rng.integers(p.episodes, size=batch)
        qs = rng.integers(len(p.bank.questions), size=max(1, batch // group))
        if self.group_by == "episode":  # one order per group, played ``group`` times
            orders = np.repeat(rng.integers(p.perms, size=(len(qs), 1)), group, axis=1)
        else:
            orders = rng.integers(p.perms, size=(len(qs), group))
        return (qs[:, None] * p.perms + orders).reshape(-1)

    def play(self, actor: nn.Module, starts: np.ndarray, rng: np.random.Generator) -> Batch:
        ro = rollout(self.pool, prob_fn(actor), starts, rng, self.cost, trace_frac=self.trace_frac)
        m = ro.mask
        return Batch(
            obs=self.pool.feats[starts][m],
            act=ro.actions[m],
            ret=ro.reward_to_go[m].astype(np.float64),
            ep_reward=ro.reward,
            decisions=m.sum(1),
            # stopping now, in reward-to-go units (the sunk cost cancels): the majority's correctness
            stop_now=self.pool.correct[starts][m].astype(np.float32),
            infos=[],
        )

    def has_outcome_table(self) -> bool:
        return True

    def outcome_table(
        self, actor: nn.Module, starts: np.ndarray, rng: np.random.Generator, it: int
    ) -> OutcomeTable:
        if self.trace_check:  # the arrays must agree with rewards read from traces
            checked = it % self.trace_check_every == 0
            rollout(
                self.pool,
                prob_fn(actor),
                starts[: self.trace_check],
                rng,
                self.cost,
                trace_frac=float(checked),
            )
        return OutcomeTable(self.pool.feats[starts], self.reward[starts], stop_action=1)

    def evaluate(self, actor: nn.Module) -> dict[str, float]:
        """Deterministic policy on every question in bank order (pool orderings 0). Rewards come
        from the pool's arrays (training checks them against traces): building traces here cost a
        quarter of the main job."""
        p = self.pool
        eps = np.flatnonzero(np.arange(p.episodes) % p.perms == 0)
        ro = rollout(p, prob_fn(actor), eps, np.random.default_rng(0), self.cost, greedy=True, trace_frac=0.0)
        return {
            "eval_reward": float(ro.reward.mean()),
            "eval_accuracy": float(p.correct[eps, ro.stop_step].mean()),
            "eval_samples": float(p.points[ro.stop_step].mean()),
        }

    def policy(self, actor: nn.Module, algo: str, seed: int) -> StopPolicy:
        assert self.config is not None
        self.config.algorithm, self.config.seed, self.config.cost = algo, seed, self.cost
        return StopPolicy.from_torch(self.config, actor)
