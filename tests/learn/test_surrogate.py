"""PPO's clipped surrogate (learn/rl/surrogate.py), the objective every trainer uses, by hand."""

from __future__ import annotations

import math

import pytest
import torch

from orchestrace.learn.rl.surrogate import clipped_surrogate


def test_loss_kl_and_clip_fraction_by_hand():
    ratios = [1.0, 1.5, 0.5, 1.1]
    adv = torch.tensor([1.0, 1.0, -2.0, -1.0])
    old = torch.zeros(4)
    logp = torch.log(torch.tensor(ratios)).requires_grad_(True)
    s = clipped_surrogate(logp, old, adv, 0.2)
    # min(r A, clip(r) A): 1, min(1.5, 1.2) = 1.2, min(-1, -1.6) = -1.6, min(-1.1, -1.1) = -1.1
    assert float(s.loss) == pytest.approx(-(1 + 1.2 - 1.6 - 1.1) / 4)
    assert s.clip_fraction == 0.5  # 1.5 and 0.5 left [0.8, 1.2]
    assert s.approx_kl == pytest.approx(sum((r - 1) - math.log(r) for r in ratios) / 4)
    s.loss.backward()
    # clipped elements pass no gradient: d/dlogp of -r A / 4 elsewhere
    assert logp.grad.tolist() == pytest.approx([-0.25, 0.0, 0.0, 0.275])


def test_weights_average_per_sequence_then_over_sequences():
    logp = torch.tensor([0.1, -0.1, 0.0])
    adv = torch.tensor([1.0, 1.0, -1.0])
    # two sequences (2 tokens, 1 token): the mean of each sequence's token mean
    s = clipped_surrogate(logp, torch.zeros(3), adv, 0.2, weight=torch.tensor([0.25, 0.25, 0.5]))
    r = [math.exp(0.1), math.exp(-0.1)]
    assert float(s.loss) == pytest.approx(-((r[0] + r[1]) / 2 + -1.0) / 2)
    assert s.entropy is None
