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

from ...core.model import Trace
from .loop import decision_batch, run_reward
from .policy import StopPolicy
from .traces import VoteEpisode


@dataclass(frozen=True)
class ReplayFigures:
    """What one update saw and did (``iteration.json``'s ``train`` figures)."""

    reward: float  # mean reward of the runs collected this iteration
    accuracy: float
    mean_samples: float
    decisions: float  # decisions of this iteration's runs
    replayed_runs: float  # runs in the update, this iteration's included
    replayed_decisions: float
    mean_weight: float  # mean importance weight over the update's decisions
    effective_fraction: float  # Kish effective sample size of the weights / decisions
    approx_kl: float  # KL(pi_k || new) at the last step, on the update's decisions
    clip_fraction: float


def importance_weights(
    policy: StopPolicy, x: np.ndarray, act: np.ndarray, recorded: np.ndarray, max_weight: float
) -> np.ndarray:
    """pi(a|x) / mu(a|x) per decision, truncated at ``max_weight``: ``recorded`` is mu, the
    probability of the action taken that the run's trace holds."""
    p_stop = policy.stop_prob(x).astype(np.float64)
    now = np.where(act > 0.5, p_stop, 1.0 - p_stop)
    return np.minimum(now / np.clip(recorded.astype(np.float64), 1e-6, 1.0), max_weight)


def importance_weighted_update(
    policy: StopPolicy,
    runs: list[tuple[Trace, VoteEpisode]],
    replayed: list[tuple[Trace, VoteEpisode]],
    cost: float,
    lr: float,
    epochs: int,
    clip: float,
    max_weight: float,
) -> tuple[StopPolicy, ReplayFigures]:
    """``epochs`` plain gradient steps (as ``loop.clipped_update``: their size follows the credit)
    on the weighted clipped surrogate over ``runs`` (this iteration's) and ``replayed`` (earlier
    iterations' runs still in the window), each decision credited leave-one-out from its trace."""
    import torch
    from torch.nn.functional import logsigmoid

    from ..rl.surrogate import clipped_surrogate

    outcomes = [run_reward(trace, ep, cost) for trace, ep in runs]
    budget = policy.config.budget
    x, a, credit, prob = decision_batch(runs + replayed, budget, cost)
    n_now = len(decision_batch(runs, budget, cost)[1])
    w = importance_weights(policy, x, a, prob, max_weight)
    actor = policy.torch_actor()
    params = list(actor.parameters())
    xt, at, adv = torch.from_numpy(x), torch.from_numpy(a), torch.from_numpy(credit)
    weight = torch.from_numpy((w / len(w)).astype(np.float32))

    def logp() -> torch.Tensor:
        z = actor(xt).squeeze(-1)
        return at * logsigmoid(z) + (1 - at) * logsigmoid(-z)

    with torch.no_grad():
        old_logp = logp()
    kl = clipped = 0.0
    for _ in range(epochs):
        s = clipped_surrogate(logp(), old_logp, adv, clip, weight=weight)
        kl, clipped = s.approx_kl, s.clip_fraction
        grads = torch.autograd.grad(s.loss, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p -= lr * g
    new = StopPolicy.from_torch(policy.config, actor)
    return new, ReplayFigures(
        reward=float(np.mean([r for r, _ in outcomes])),
        accuracy=float(np.mean([ok for _, ok in outcomes])),
        mean_samples=float(np.mean([len(ep.answers) for _, ep in runs])),
        decisions=float(n_now),
        replayed_runs=float(len(runs) + len(replayed)),
        replayed_decisions=float(len(w)),
        mean_weight=float(w.mean()),
        effective_fraction=float(w.sum() ** 2 / (len(w) * (w**2).sum())) if w.any() else 0.0,
        approx_kl=kl,
        clip_fraction=clipped,
    )
