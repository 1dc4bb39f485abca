"""What every algorithm file shares: the optimiser, gradient clipping, the action distribution of a
policy net (log-probabilities and entropy), the learning-curve bookkeeping, the result."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from .tasks import SavedPolicy, Task


class Adam:
    """Adam (Kingma & Ba 2015) in a few lines. ``torch.optim`` imports ``torch._dynamo`` on first
    use, which costs 5-20 s on a busy 2-core machine: more than a whole default training run.
    ``lr`` is one rate or one per parameter (a critic may learn faster than its actor)."""

    def __init__(
        self,
        params: Any,
        lr: float | Sequence[float],
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lrs = [float(lr)] * len(self.params) if isinstance(lr, int | float) else [float(x) for x in lr]
        self.b1, self.b2, self.eps = betas[0], betas[1], eps
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
        for p, m, v, lr in zip(self.params, self.m, self.v, self.lrs, strict=True):
            if p.grad is None:
                continue
            m.mul_(self.b1).add_(p.grad, alpha=1 - self.b1)
            v.mul_(self.b2).addcmul_(p.grad, p.grad, value=1 - self.b2)
            p.addcdiv_(m / c1, (v / c2).sqrt_().add_(self.eps), value=-lr)


def optimiser(actor: nn.Module, critic: nn.Module | None, lr: float, critic_lr: float | None) -> Adam:
    """One Adam over actor and critic; the critic's rate is ``critic_lr`` (None: ``lr``)."""
    a = list(actor.parameters())
    c = list(critic.parameters()) if critic is not None else []
    return Adam([*a, *c], lr=[lr] * len(a) + [lr if critic_lr is None else critic_lr] * len(c))


def clip_grad(params: Any, max_norm: float | None) -> None:
    """Scale the gradients so that their global norm is at most ``max_norm`` (None: no clipping)."""
    if max_norm is None:
        return
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.sqrt(sum((g**2).sum() for g in grads))
    if norm > max_norm:
        for g in grads:
            g.mul_(max_norm / (norm + 1e-6))


def log_probs(actor: nn.Module, obs: torch.Tensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """log pi(a|s) and the entropy of pi(.|s). An actor with one output is a Bernoulli over
    {0, 1} (P(1) = sigmoid(z): the StopVote stop policy); with n outputs, a softmax over n actions."""
    logits = actor(obs)
    if logits.shape[-1] == 1:
        z = logits.squeeze(-1)
        logp = -nn.functional.binary_cross_entropy_with_logits(z, act.to(z.dtype), reduction="none")
        p = torch.sigmoid(z)
        return logp, -(p * torch.log(p + 1e-8) + (1 - p) * torch.log(1 - p + 1e-8))
    logp_all = torch.log_softmax(logits, dim=-1)
    return logp_all.gather(1, act[:, None])[:, 0], -(logp_all.exp() * logp_all).sum(-1)


def action_probs(logits: torch.Tensor, action: int) -> torch.Tensor:
    """P(action) from the actor's outputs (one output: a Bernoulli, P(1) = sigmoid)."""
    if logits.shape[-1] == 1:
        z = torch.sigmoid(logits.squeeze(-1))
        return z if action == 1 else 1 - z
    return torch.softmax(logits, dim=-1)[..., action]


@dataclass
class TrainResult:
    policy: SavedPolicy
    history: list[dict[str, float]] = field(default_factory=list)


def record(
    history: list[dict[str, float]],
    it: int,
    batch_reward: float,
    task: Task,
    actor: nn.Module,
    *,
    iterations: int,
    eval_every: int,
    progress: Callable[[int], None] | None,
) -> None:
    """Learning-curve bookkeeping shared by every algorithm: the batch reward of iteration ``it``
    (0-based), the task's evaluation (StopVote: greedy on the pool) every ``eval_every``
    iterations and at both ends, a progress tick."""
    last = it in (0, iterations - 1) or (it + 1) % eval_every == 0
    history.append(
        {"iteration": it + 1, "batch_reward": batch_reward, **(task.evaluate(actor) if last else {})}
    )
    if progress:
        progress(1)
