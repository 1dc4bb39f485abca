"""``loop stop``'s update from what the recorded runs say about the answers, not about the actions.

A stop decision never changes the answers a run draws: they are i.i.d. draws of the model for the
question, whatever the policy does. By exchangeability the answer counts so far (largest first,
plus the unparsable ones) are a sufficient state: the chance that the majority (ties to the answer
seen first) is right and the chance of each next answer depend on the counts only, and so do the
policy's features. So every recorded run, whichever policy drew it, is a sample of that process:
at every prefix it shows the reward of stopping there (known from the gold, whether or not the
run stopped) and, where the run went on, one transition. Neither needs an importance weight: a
policy of the counts continues independently of the answers it has not seen yet.

The update (:func:`model_update`) maximises the policy's exact expected reward under this fitted
process (dynamic programming over the states, differentiable in the policy's probabilities) with
Adam, held near the current policy by a KL penalty per state, instead of crediting each decision
with what the recording policy's later random decisions happened to buy: that credit's noise
left the 28 Nov update level with its start (docs/learn_loop.md). A state fewer than ``known`` (3)
runs went on from (the frontier) is not trusted: continuing there is valued optimistically, as a right answer after
one more (R-max's optimism and its m known visits, Brafman and Tennenholtz 2002), so the policy
goes on where the runs have not looked and its next runs look; valuing it as stopping instead
(pessimism) left the replayed loop stopping early on 2 of 6 starts (after one answer, after two).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...core.stats import majority
from .features import prefix_features
from .policy import StopPolicy
from .traces import VoteEpisode

State = tuple[tuple[int, ...], int]  # (vote counts of the distinct answers, largest first; null answers)


def count_state(answers: Sequence[str | None]) -> State:
    """The sufficient state of an answer prefix: its counts, largest first, and its nulls."""
    counts = Counter(a for a in answers if a is not None)
    return tuple(sorted(counts.values(), reverse=True)), sum(a is None for a in answers)


def state_answers(state: State) -> list[str | None]:
    """An answer prefix with that state (the majority first), for the policy's features."""
    counts, nulls = state
    return [f"a{i}" for i, c in enumerate(counts) for _ in range(c)] + [None] * nulls


def samples(state: State) -> int:
    return sum(state[0]) + state[1]


@dataclass
class AnswerModel:
    """Per state: the summed reward of stopping there over its visits, and the next states seen."""

    budget: int
    cost: float
    stop_sum: dict[State, float] = field(default_factory=lambda: defaultdict(float))
    visits: Counter[State] = field(default_factory=Counter)
    next_states: dict[State, Counter[State]] = field(default_factory=lambda: defaultdict(Counter))
    first: Counter[State] = field(default_factory=Counter)  # the state after each run's first answer

    def q_stop(self, s: State) -> float:
        return self.stop_sum[s] / self.visits[s]


def fit_answer_model(episodes: Sequence[VoteEpisode], budget: int, cost: float) -> AnswerModel:
    """The answer process as every run's prefixes show it: the reward of stopping at each prefix
    (majority against the gold, minus ``cost`` per answer; the run's own sample costs when it has
    them), and each prefix's next state where the run went on."""
    m = AnswerModel(budget, cost)
    for ep in episodes:
        answers = ep.answers[:budget]
        costs = np.cumsum(ep.costs[: len(answers)] if ep.costs else np.ones(len(answers)))
        states = [count_state(answers[: t + 1]) for t in range(len(answers))]
        if states:
            m.first[states[0]] += 1
        for t, s in enumerate(states):
            best = majority(answers[: t + 1])
            m.stop_sum[s] += float(best is not None and best == ep.gold) - cost * float(costs[t])
            m.visits[s] += 1
            if t + 1 < len(states):
                m.next_states[s][states[t + 1]] += 1
    return m


@dataclass(frozen=True)
class ModelArrays:
    """The fitted process as arrays over its states (most answers first)."""

    states: list[State]
    x: np.ndarray  # [S, F] the policy's features of each state
    explored: np.ndarray  # [S] a decision some run went on from
    frontier: np.ndarray  # [S] a decision no run went on from
    trans: np.ndarray  # [S, S] P(next state | state), rows of explored states
    q_stop: np.ndarray  # [S] mean reward of stopping there
    optimistic: np.ndarray  # [S] what continuing at a frontier state is valued at
    first: np.ndarray  # [S] share of runs whose first answer lands there


def model_arrays(model: AnswerModel, known: int) -> ModelArrays:
    """``known``: runs that went on from a state before its transitions are trusted (R-max's m);
    a state with fewer is on the frontier."""
    states = sorted(model.visits, key=lambda s: (-samples(s), s))
    index = {s: i for i, s in enumerate(states)}
    n = len(states)
    decides = np.array([samples(s) < model.budget for s in states], bool)
    went_on = [sum(model.next_states[s].values()) if s in model.next_states else 0 for s in states]
    explored = np.array([n >= known for n in went_on], bool) & decides
    trans = np.zeros((n, n))
    for s, nxt in model.next_states.items():
        if explored[index[s]]:
            total = sum(nxt.values())
            for s2, c in nxt.items():
                trans[index[s], index[s2]] = c / total
    first = np.zeros(n)
    runs = sum(model.first.values())
    for s, c in model.first.items():
        first[index[s]] = c / runs
    return ModelArrays(
        states=states,
        x=np.stack([prefix_features(state_answers(s), model.budget) for s in states]).astype(np.float32),
        explored=explored,
        frontier=decides & ~explored,
        trans=trans,
        q_stop=np.array([model.q_stop(s) for s in states]),
        optimistic=np.array([1.0 - model.cost * (samples(s) + 1) for s in states]),
        first=first,
    )


def policy_value(p_stop: Any, m: ModelArrays, budget: int) -> Any:
    """The expected reward per run of a policy with these P(stop) per state (torch, float64): from
    the most answers down, V = P(stop) Q_stop + P(continue) Q_continue, Q_continue = sum P(s'|s)
    V(s') where runs went on, the optimistic value at the frontier, a forced stop at the budget."""
    import torch

    q_stop, trans = torch.from_numpy(m.q_stop), torch.from_numpy(m.trans)
    explored, frontier = torch.from_numpy(m.explored), torch.from_numpy(m.frontier)
    go_on = torch.where(frontier, torch.from_numpy(m.optimistic), q_stop)
    v = torch.where(frontier, p_stop * q_stop + (1 - p_stop) * go_on, q_stop)
    for _ in range(budget):  # each pass settles one more level of answers
        v = torch.where(explored, p_stop * q_stop + (1 - p_stop) * (trans @ v), v)
    return (torch.from_numpy(m.first) * v).sum()


@dataclass(frozen=True)
class ModelUpdateFigures:
    """What a model update saw and did."""

    states: float  # distinct answer-count states in the runs
    explored_states: float  # decisions some run went on from
    frontier_states: float  # decisions no run went on from (valued optimistically)
    model_value_before: float  # expected reward per run under the fitted process, optimism included
    model_value: float  # the same for the updated policy
    approx_kl: float  # mean KL(old || new) over the explored states
    entropy: float  # mean entropy of the updated P(stop) over the explored states


def model_update(
    policy: StopPolicy,
    model: AnswerModel,
    *,
    lr: float = 0.01,
    steps: int = 200,
    kl_coef: float = 0.1,
    known: int = 3,
) -> tuple[StopPolicy, ModelUpdateFigures]:
    """``steps`` Adam steps on the policy's expected reward under the fitted process minus
    ``kl_coef`` x the mean KL(current || new) of P(stop) over the explored states (the penalty keeps
    the runs of the next iteration exploring what the data cannot yet decide). A state is explored
    once ``known`` runs went on from it: with 1, the replayed loop from a start already near the
    best trusted one batch of hard questions and ended at "stop after one answer" on 1 of 20
    replay seeds (-0.12 on the training questions; the live seed 0 lost 0.07 the same way); with 3
    none of the 20 lost more than 0.024, at the same gains from the other starts."""
    import torch

    m = model_arrays(model, known)
    x, explored = torch.from_numpy(m.x), torch.from_numpy(m.explored)
    actor = policy.torch_actor()

    def p_stop() -> torch.Tensor:
        return torch.sigmoid(actor(x).squeeze(-1)).double().clamp(1e-6, 1 - 1e-6)

    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        each = old * torch.log(old / new) + (1 - old) * torch.log((1 - old) / (1 - new))
        return (each * explored).sum() / explored.sum().clamp(min=1)

    with torch.no_grad():
        old = p_stop()
        before = float(policy_value(old, m, model.budget))
    opt = torch.optim.Adam(actor.parameters(), lr=lr)
    for _ in range(steps):
        p = p_stop()
        loss = -policy_value(p, m, model.budget) + kl_coef * kl(old, p)
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        p = p_stop()
        after, moved = float(policy_value(p, m, model.budget)), float(kl(old, p))
        each = -(p * torch.log(p) + (1 - p) * torch.log(1 - p))
        entropy = float((each * explored).sum() / explored.sum().clamp(min=1))
    return StopPolicy.from_torch(policy.config, actor), ModelUpdateFigures(
        float(len(m.states)), float(m.explored.sum()), float(m.frontier.sum()), before, after, moved, entropy
    )
