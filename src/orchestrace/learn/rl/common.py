"""What every algorithm file shares: the optimiser (``torch.optim.Adam``), gradient clipping, the action distribution of a
policy net (log-probabilities and entropy), the learning-curve bookkeeping, the result."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from .tasks import SavedPolicy, Task


def optimiser(
    actor: nn.Module, critic: nn.Module | None, lr: float, critic_lr: float | None
) -> torch.optim.Adam:
    """One ``torch.optim.Adam`` over actor and critic; the critic's rate is ``critic_lr`` (None: ``lr``)."""
    groups = [{"params": list(actor.parameters()), "lr": lr}]
    if critic is not None:
        groups.append({"params": list(critic.parameters()), "lr": lr if critic_lr is None else critic_lr})
    return torch.optim.Adam(groups, lr=lr, foreach=False)


def parameters(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every parameter an optimiser steps (for clipping their global gradient norm together)."""
    return [p for group in opt.param_groups for p in group["params"]]


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
