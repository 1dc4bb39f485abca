"""The optimiser every algorithm file steps with (``torch.optim.Adam``, the critic in its own parameter\ngroup) and the clipping of the global gradient norm."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    pass


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
