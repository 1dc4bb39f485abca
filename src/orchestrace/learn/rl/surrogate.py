"""PPO's clipped surrogate objective (Schulman et al. 2017), the one every trainer of the package
uses: the StopVote PPO of :mod:`.ppo`, the ``loop stop`` update and ``train team``'s per-adapter loss.

Per element (an action, or a token of a completion): ratio r = exp(logp - old_logp), objective
min(r A, clip(r, 1 - eps, 1 + eps) A). With the loss come the figures standard implementations
log: the approximate KL(old || new) as the unbiased, always non-negative estimator
(r - 1) - log r (Schulman's "k3"; CleanRL's ``approx_kl``), the fraction of elements whose ratio
left the clip range, and the mean entropy when the caller has it."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ClippedSurrogate:
    loss: torch.Tensor  # -(weighted) mean objective, with gradient
    approx_kl: float
    clip_fraction: float
    entropy: float | None = None  # mean entropy of the policy at these elements, when given


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantage: torch.Tensor | float,
    clip: float,
    *,
    weight: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
) -> ClippedSurrogate:
    """The loss -mean(min(r A, clip(r) A)), or -sum(weight x objective) with ``weight`` (how a
    caller averages over tokens, then sequences); the figures are unweighted means over elements."""
    log_ratio = logp - old_logp
    ratio = torch.exp(log_ratio)
    objective = torch.minimum(ratio * advantage, torch.clamp(ratio, 1 - clip, 1 + clip) * advantage)
    loss = -objective.mean() if weight is None else -(objective * weight).sum()
    with torch.no_grad():
        approx_kl = float(((ratio - 1) - log_ratio).mean()) if ratio.numel() else 0.0
        clipped = float(((ratio - 1).abs() > clip).float().mean()) if ratio.numel() else 0.0
        ent = float(entropy.mean()) if entropy is not None and entropy.numel() else None
    return ClippedSurrogate(loss, approx_kl, clipped, ent)
