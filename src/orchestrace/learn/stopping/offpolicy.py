"""``loop stop``'s update on every recorded run, not only the last iteration's: off-policy reuse
with importance weights.

Twelve runs per iteration carry too little signal (docs/learn_loop.md: the live loop ended level
with its start), and a vote run is cheap to keep: each trace records, per ``should_stop``
decision, the probability its policy gave the action taken. So an update reads the runs of the
last ``window`` iterations and weights each decision by how much more (or less) likely the
current policy is to take that action than the policy that ran it: w = pi_k(a|x) / mu(a|x),
truncated at ``max_weight`` (V-trace's rho-bar, Espeholt et al. 2018) so a run the current policy
would rarely repeat cannot dominate. On top, PPO's clipped surrogate (``rl.surrogate``) around the
current policy pi_k, as in off-policy PPO with replay (GePPO, Queeney et al. 2021): the step
stays in a trust region of the policy being updated whatever policy recorded the data. With only
the last iteration's runs (``window`` 1) every w is 1 up to float rounding (the runs were
sampled by pi_k) and this is the on-policy clipped update.

What is not corrected: a "continue" decision's credit is what the *recording* policy's later
decisions bought (the per-decision weight covers the decision, not the rest of the run), the
usual truncated-IS bias; it shrinks as the window's policies stay close (the clip sees to that).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .policy import StopPolicy


@dataclass(frozen=True)
class WeightedStepFigures:
    """What the weighted steps saw and did."""

    mean_weight: float  # mean importance weight over the decisions
    effective_fraction: float  # Kish effective sample size of the weights / decisions
    approx_kl: float  # KL(pi_k || new) at the last step
    clip_fraction: float
    entropy: float  # mean entropy of P(stop) over the decisions at the last step
    steps: float  # gradient steps taken (fewer than the epochs when the KL passed its target)


def importance_weights(
    policy: StopPolicy, x: np.ndarray, act: np.ndarray, recorded: np.ndarray, max_weight: float
) -> np.ndarray:
    """pi(a|x) / mu(a|x) per decision, truncated at ``max_weight``: ``recorded`` is mu, the
    probability of the action taken that the run's trace holds."""
    p_stop = policy.stop_prob(x).astype(np.float64)
    now = np.where(act > 0.5, p_stop, 1.0 - p_stop)
    return np.minimum(now / np.clip(recorded.astype(np.float64), 1e-6, 1.0), max_weight)


def weighted_clipped_steps(
    policy: StopPolicy,
    x: np.ndarray,
    act: np.ndarray,
    credit: np.ndarray,
    recorded: np.ndarray,
    lr: float,
    epochs: int,
    clip: float,
    max_weight: float,
    target_kl: float | None = None,
) -> tuple[StopPolicy, WeightedStepFigures]:
    """``epochs`` plain gradient steps on the importance-weighted clipped surrogate of the
    decisions (features ``x``, actions, credit, recorded probability of the action taken).
    Plain steps because their size follows the credit: Adam's does not, so a batch whose only
    credit was the cost of answers that changed nothing (-0.01 each) moved P(stop) from 0.497 to
    0.9999 in one update, past any clip (its momentum runs on), and a policy that always stops
    gets credit 0 on every decision and never moves again (docs/learn_loop.md, "Why the loop
    collapsed"). ``target_kl``: no further step once the policy's approximate KL to pi_k passed
    it (CleanRL's early stop; measured before each step, so the step that would go further is
    not taken)."""
    import torch
    from torch.nn.functional import logsigmoid

    from ..rl.surrogate import clipped_surrogate

    w = importance_weights(policy, x, act, recorded, max_weight)
    actor = policy.torch_actor()
    params = list(actor.parameters())
    xt, at, adv = torch.from_numpy(x), torch.from_numpy(act), torch.from_numpy(credit)
    weight = torch.from_numpy((w / len(w)).astype(np.float32))

    def logp() -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probability of each recorded action, and the entropy of P(stop) there."""
        z = actor(xt).squeeze(-1)
        stop, go = logsigmoid(z), logsigmoid(-z)
        p = torch.sigmoid(z)
        return at * stop + (1 - at) * go, -(p * stop + (1 - p) * go).detach()

    with torch.no_grad():
        old_logp = logp()[0]
    kl = clipped = entropy = 0.0
    steps = 0
    for _ in range(epochs):
        now, ent = logp()
        s = clipped_surrogate(now, old_logp, adv, clip, weight=weight, entropy=ent)
        kl, clipped, entropy = s.approx_kl, s.clip_fraction, s.entropy or 0.0
        if target_kl is not None and kl > target_kl:
            break
        steps += 1
        grads = torch.autograd.grad(s.loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p -= lr * g
    effective = float(w.sum() ** 2 / (len(w) * (w**2).sum())) if w.any() else 0.0
    return StopPolicy.from_torch(policy.config, actor), WeightedStepFigures(
        float(w.mean()), effective, kl, clipped, entropy, float(steps)
    )
