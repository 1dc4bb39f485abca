"""Pieces every algorithm shares: networks, the torch stop-probability function, greedy evaluation."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from ..envs.stopvote import EpisodePool, rollout
from ..stopping.policy import PolicyConfig, StopPolicy


class Adam:
    """Adam (Kingma & Ba 2015) in a few lines. ``torch.optim`` imports ``torch._dynamo`` on first
    use, which costs 5-20 s on a busy 2-core machine: more than a whole default training run."""

    def __init__(
        self, params: Any, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.b1, self.b2, self.eps = lr, betas[0], betas[1], eps
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        c1, c2 = 1 - self.b1**self.t, 1 - self.b2**self.t
        for p, m, v in zip(self.params, self.m, self.v, strict=True):
            if p.grad is None:
                continue
            m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
            p.addcdiv_(m / c1, (v / c2).sqrt_().add_(self.eps), value=-self.lr)


def clip_grad(params: Any, max_norm: float) -> None:
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / (norm + 1e-6))


@dataclass
class TrainResult:
    policy: StopPolicy
    history: list[dict[str, float]] = field(default_factory=list)


def make_actor(config: PolicyConfig, seed: int, init_stop: float = 0.3) -> nn.Sequential:
    """Fresh actor; the output bias starts at logit(init_stop) so early episodes run long
    enough to see what more samples buy."""
    torch.manual_seed(seed)
    actor = StopPolicy.init(config, seed).torch_actor()
    with torch.no_grad():
        actor[-1].bias.fill_(float(np.log(init_stop / (1 - init_stop))))
        actor[-1].weight.mul_(0.1)
    return actor


def make_critic(n_in: int, hidden: list[int], seed: int) -> nn.Sequential:
    torch.manual_seed(seed + 1)
    layers: list[nn.Module] = []
    for i, o in zip([n_in, *hidden], hidden, strict=False):
        layers += [nn.Linear(i, o), nn.Tanh()]
    layers.append(nn.Linear(hidden[-1], 1))
    return nn.Sequential(*layers)


def prob_fn(actor: nn.Module) -> Callable[[np.ndarray], np.ndarray]:
    """numpy features -> stop probabilities, without gradients."""

    def f(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return torch.sigmoid(actor(torch.from_numpy(x)).squeeze(-1)).numpy()

    return f


def greedy_eval(pool: EpisodePool, actor: nn.Module, cost: float) -> dict[str, float]:
    """Deterministic policy on every question in bank order (pool orderings 0). Rewards come
    from the pool's arrays (training checks them against traces): building traces here cost a
    quarter of the main job."""
    eps = np.flatnonzero(np.arange(pool.episodes) % pool.perms == 0)
    ro = rollout(pool, prob_fn(actor), eps, np.random.default_rng(0), cost, greedy=True, trace_frac=0.0)
    n = pool.points[ro.stop_step]
    acc = pool.correct[eps, ro.stop_step]
    return {
        "eval_reward": float(ro.reward.mean()),
        "eval_accuracy": float(acc.mean()),
        "eval_samples": float(n.mean()),
    }


def log_probs(actor: nn.Module, obs: torch.Tensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(a|s) for Bernoulli stop actions, and the policy entropy."""
    logits = actor(obs).squeeze(-1)
    logp = -nn.functional.binary_cross_entropy_with_logits(logits, act, reduction="none")
    p = torch.sigmoid(logits)
    ent = -(p * torch.log(p + 1e-8) + (1 - p) * torch.log(1 - p + 1e-8))
    return logp, ent


def end_iteration(
    history: list[dict[str, float]],
    it: int,
    batch_reward: float,
    *,
    pool: EpisodePool,
    actor: nn.Module,
    cost: float,
    iterations: int,
    eval_every: int,
    progress: Callable[[int], None] | None,
) -> None:
    """Learning-curve bookkeeping shared by every algorithm: the batch reward of iteration ``it``
    (0-based), a greedy evaluation every ``eval_every`` iterations and at both ends, a progress tick."""
    last = it in (0, iterations - 1) or (it + 1) % eval_every == 0
    history.append(
        {
            "iteration": it + 1,
            "batch_reward": batch_reward,
            **(greedy_eval(pool, actor, cost) if last else {}),
        }
    )
    if progress:
        progress(1)
