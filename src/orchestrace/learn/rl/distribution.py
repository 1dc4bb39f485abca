"""The action distribution of a policy net: log-probabilities and entropy of the actions taken, and\nthe probability of one action (one output: a Bernoulli, the StopVote stop policy; n: a softmax)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    pass


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
