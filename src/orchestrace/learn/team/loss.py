"""The update's loss: PPO's clipped surrogate (:mod:`learn.rl.surrogate`) on the recorded
behaviour log-probs, averaged per adapter as the team trainer defines it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..rl.surrogate import clipped_surrogate
from .batch import CallRow
from .model import TeamModel

UPDATE_ROWS = 64  # calls per forward/backward pass of the update: the activations of 64 calls at most


def policy_loss(
    model: TeamModel, rows: list[CallRow], clip: float, backward: bool = False, kl_coef: float = 0.0
) -> tuple[Any, dict[str, float]]:
    """PPO-clip on the recorded log-probs: per adapter, the mean over its calls of the mean over
    tokens of -min(r A, clip(r) A); the total is the sum over adapters. With ``kl_coef`` > 0 each
    token also pays ``kl_coef`` x KL(policy || base model), Schulman's k3 estimator
    exp(ref - new) - (ref - new) - 1 as TRL's GRPO adds it (``beta``), averaged the same way: it
    keeps an adapter near what the base model would say. Returns (loss, figures: each adapter's
    loss, and over all tokens the clip fraction, approximate KL, the entropy of the sampling
    distribution and, with ``kl_coef``, ``kl_ref``, the mean k3).
    Calls go through the model :data:`UPDATE_ROWS` at a time, each pass one prefix tree
    (:meth:`TeamModel.token_logprobs`); with ``backward`` each pass's share of the loss is
    backpropagated at once (gradients accumulate), so the peak memory holds the activations of
    one pass, and the returned loss is detached."""
    torch = model.torch
    by_adapter: dict[str, list[CallRow]] = defaultdict(list)
    for r in rows:
        by_adapter[r.adapter].append(r)
    total = torch.zeros(())
    figures: dict[str, float] = {}
    clipped = kl = ent = kl_ref = 0.0
    tokens = 0
    for name in sorted(by_adapter):
        rs = by_adapter[name]
        loss = torch.zeros(())
        for start in range(0, len(rs), UPDATE_ROWS):
            part = rs[start : start + UPDATE_ROWS]
            new, entropy = model.token_logprobs(
                name,
                [r.sample.prompt_ids for r in part],
                [r.sample.completion_ids for r in part],
                [r.sample.temperature for r in part],
            )
            sizes = [len(r.sample.completion_ids) for r in part]
            # the mean over each call's tokens, then over the adapter's calls
            weight = torch.tensor([1 / (n * len(rs)) for n in sizes for _ in range(n)])
            s = clipped_surrogate(
                new,
                torch.tensor([x for r in part for x in r.sample.logprobs], dtype=torch.float32),
                torch.tensor([r.advantage for r, n in zip(part, sizes, strict=True) for _ in range(n)]),
                clip,
                weight=weight,
                entropy=entropy,
            )
            share = s.loss
            if kl_coef > 0:
                ref = model.reference_logprobs(
                    [r.sample.prompt_ids for r in part],
                    [r.sample.completion_ids for r in part],
                    [r.sample.temperature for r in part],
                )
                d = ref - new
                k3 = torch.exp(d) - d - 1
                share = share + kl_coef * (weight * k3).sum()
                kl_ref += float(k3.detach().sum())
            n = sum(sizes)
            clipped += s.clip_fraction * n
            kl += s.approx_kl * n
            ent += (s.entropy or 0.0) * n
            tokens += n
            if backward:
                share.backward()
                share = share.detach()
            loss = loss + share
        figures[f"loss_{name}"] = float(loss.detach())
        total = total + loss
    figures["clip_fraction"] = clipped / max(tokens, 1)
    figures["approx_kl"] = kl / max(tokens, 1)
    figures["entropy"] = ent / max(tokens, 1)
    if kl_coef > 0:
        figures["kl_ref"] = kl_ref / max(tokens, 1)
    return total, figures
