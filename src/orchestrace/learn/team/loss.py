"""The update's loss: PPO's clipped surrogate (:mod:`learn.rl.surrogate`) on the recorded
behaviour log-probs, averaged per adapter as the team trainer defines it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..rl.surrogate import clipped_surrogate
from .batch import CallRow
from .model import TeamModel

UPDATE_ROWS = 8  # calls per forward/backward pass of the update: activations of 8 calls, not all


def policy_loss(
    model: TeamModel, rows: list[CallRow], clip: float, backward: bool = False
) -> tuple[Any, dict[str, float]]:
    """PPO-clip on the recorded log-probs: per adapter, the mean over its calls of the mean over
    tokens of -min(r A, clip(r) A); the total is the sum over adapters. Returns (loss, figures:
    each adapter's loss, and over all tokens the clip fraction and approximate KL).
    Calls go through the model :data:`UPDATE_ROWS` at a time; with ``backward`` each pass's share
    of the loss is backpropagated at once (gradients accumulate), so the peak memory holds the
    activations of one pass (a whole batch at once took about 5 GB), and the returned loss is
    detached."""
    torch = model.torch
    by_adapter: dict[str, list[CallRow]] = defaultdict(list)
    for r in rows:
        by_adapter[r.adapter].append(r)
    total = torch.zeros(())
    figures: dict[str, float] = {}
    clipped = kl = 0.0
    tokens = 0
    for name in sorted(by_adapter):
        rs = by_adapter[name]
        loss = torch.zeros(())
        for start in range(0, len(rs), UPDATE_ROWS):
            part = rs[start : start + UPDATE_ROWS]
            new = model.sequence_logprobs(
                name,
                [r.sample.prompt_ids for r in part],
                [r.sample.completion_ids for r in part],
                [r.sample.temperature for r in part],
            )
            sizes = [len(r.sample.completion_ids) for r in part]
            s = clipped_surrogate(
                torch.cat(new),
                torch.tensor([x for r in part for x in r.sample.logprobs], dtype=torch.float32),
                torch.tensor([r.advantage for r, n in zip(part, sizes, strict=True) for _ in range(n)]),
                clip,
                # the mean over each call's tokens, then over the adapter's calls
                weight=torch.tensor([1 / (n * len(rs)) for n in sizes for _ in range(n)]),
            )
            n = sum(sizes)
            clipped += s.clip_fraction * n
            kl += s.approx_kl * n
            tokens += n
            share = s.loss
            if backward:
                share.backward()
                share = share.detach()
            loss = loss + share
        figures[f"loss_{name}"] = float(loss.detach())
        total = total + loss
    figures["clip_fraction"] = clipped / max(tokens, 1)
    figures["approx_kl"] = kl / max(tokens, 1)
    return total, figures
