"""StopVote's episodes (O5 + O4): the orchestrator queries workers one sample (or batch) at a time
and decides to continue or stop; the answer is the majority vote (or the learned aggregator's).

Every episode emits an orchestration trace (decision -> spawn -> query -> return, then the stop
decision and the aggregate), and the episode's reward is read back from that trace
(``reward.stop.stop_reward``): ``rewards["team"]`` (1 if the aggregate is right) minus c times the cost of
the samples returned. Samples are replayed from a bank; each episode draws a random permutation of
the question's samples (they are i.i.d. draws, so any order is an equally likely history).

``EpisodePool`` precomputes features of many permuted episodes so that batched rollouts
(``rollout``) cost one policy forward per batch: what training of the stop decision runs on.
``envs.stopvote.StopVoteEnv`` is the one-episode Gymnasium view of the same pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...core.build import TraceBuilder
from ...core.model import Event, Trace
from ...reward.stop import stop_reward
from .aggregate import Aggregator, answer_statics
from .banks import NULL, Bank
from .features import confidence_leader, features, replay_table

ORCH = "orchestrator"


def decision_points(budget: int, initial: int = 1, batch: int = 1) -> np.ndarray:
    """Sample counts t at which the orchestrator decides (the last one is a forced stop)."""
    pts = list(range(initial, budget, batch)) + [budget]
    return np.array(sorted(set(pts)), dtype=np.int64)


def episode_trace(
    *,
    task_id: str,
    episode: str,
    samples: list[str | None],
    costs: list[float],
    points: np.ndarray,
    n_used: int,
    answer: str | None,
    correct: bool,
    cost_coef: float,
    stop_probs: list[float] | None = None,
    aggregator: Aggregator | None = None,
) -> Trace:
    """The orchestration trace of one StopVote episode (t in ordinal steps, one per sample)."""
    b = TraceBuilder()
    rounds = [int(t) for t in points if t <= n_used]  # samples drawn after each sampling decision
    prev_returns: list[str] = []
    drawn = 0
    for r, upto in enumerate(rounds):
        did = f"d{r}"
        attrs: dict[str, Any] = {"decision": "sample", "n": upto - drawn}
        if r > 0 and stop_probs is not None:
            attrs["p_stop"] = round(stop_probs[r - 1], 6)
        b.add(
            Event(id=did, t=float(drawn), type="orchestrator_decision", agent=ORCH, attrs=attrs),
            *([(f"d{r - 1}", "temporal")] if r > 0 else []),
            *((ret, "causal") for ret in prev_returns),
        )
        prev_returns = []
        for i in range(drawn, upto):
            w = f"worker_{i}"
            ts = float(i)
            sid = b.add(
                Event(id=f"s{i}", t=ts, type="spawn", agent=ORCH, to=w, role="sampler"), (did, "spawn")
            )
            qid = b.add(
                Event(id=f"q{i}", t=ts, type="message", agent=ORCH, from_=ORCH, to=w, content_ref=task_id),
                (sid, "causal"),
            )
            rid = b.add(
                Event(
                    id=f"r{i}",
                    t=ts + 0.5,
                    t_end=ts + 1.0,
                    type="return",
                    agent=w,
                    role="sampler",
                    from_=w,
                    to=ORCH,
                    content=samples[i],
                    status="ok" if samples[i] is not None else "error",
                    attrs={"sample_cost": costs[i]},
                ),
                (qid, "message"),
            )
            prev_returns.append(rid)
        drawn = upto
    t_end = float(n_used)
    stop_attrs: dict[str, Any] = {"decision": "stop", "samples": n_used}
    if stop_probs is not None and len(stop_probs) >= len(rounds):
        stop_attrs["p_stop"] = round(stop_probs[len(rounds) - 1], 6)
    b.add(
        Event(id="stop", t=t_end, type="orchestrator_decision", agent=ORCH, attrs=stop_attrs),
        (f"d{len(rounds) - 1}", "temporal"),
        *((ret, "causal") for ret in prev_returns),
    )
    votes: dict[str, int] = {}
    for s in samples[:n_used]:
        if s is not None:
            votes[s] = votes.get(s, 0) + 1
    b.add(
        Event(
            id="agg",
            t=t_end,
            type="aggregate",
            agent=ORCH,
            content=answer,
            attrs={"method": "majority", "votes": votes}
            if aggregator is None
            else {"method": "learned-weighted", "votes": votes, "weights": aggregator.to_dict()},
        ),
        ("stop", "causal"),
        *((f"r{i}", "aggregate") for i in range(n_used)),
    )
    spent = float(sum(costs[:n_used]))
    team = 1.0 if correct else 0.0
    return b.trace(
        trace_id=episode,
        task_id=task_id,
        system="orchestrace.learn.stopvote",
        topology="centralized",
        rewards={"team": team, "orchestration": team - cost_coef * spent},
        costs={"tokens": 0.0, "wall_clock_s": t_end, "messages": float(n_used), "samples": float(n_used)},
        metrics={"task_success": team, "samples": float(n_used)},
        metadata={"env": "StopVote", "cost_coef": cost_coef},
    )


@dataclass
class EpisodePool:
    """Features of ``perms`` random orderings of every bank question (ordering 0 = bank order)."""

    bank: Bank
    budget: int
    perms: int  # orderings per question; episode e is question e // perms, ordering e % perms
    points: np.ndarray  # [D] decision sample counts
    feats: np.ndarray  # [E, D, F]
    correct: np.ndarray  # [E, D] majority correct after t samples
    answer: np.ndarray  # [E, D] majority answer id (question's own ids)
    costcum: np.ndarray  # [E, D] cost of the first t samples
    question: np.ndarray  # [E] question index
    order: np.ndarray  # [E, budget] sample indices in draw order
    aggregator: Aggregator | None = None  # None: majority vote
    confidence: bool = False  # features include ``CONF_FEATURE_NAMES`` (token log-probabilities)
    weighted: bool = False  # the answer is the confidence-weighted leader, not the majority

    @property
    def episodes(self) -> int:
        return len(self.question)


def build_pool(
    bank: Bank,
    budget: int = 40,
    perms: int = 16,
    seed: int = 0,
    initial: int = 1,
    batch: int = 1,
    aggregator: Aggregator | None = None,
    confidence: bool = False,
    weighted: bool = False,
) -> EpisodePool:
    """Features of ``perms`` orders of every question; the answer at each decision is the
    majority vote, the learned ``aggregator``'s choice (whose features are then appended), or
    with ``weighted`` the confidence-weighted leader (``rules.confidence_answer``); with
    ``confidence`` the token-confidence features come last.
    A question without truth counts as answered right when the answer is its full-budget
    majority (as in evaluation), so unlabelled banks train too."""
    rng = np.random.default_rng(seed)
    pts = decision_points(budget, initial, batch)
    mean_cost = float(np.mean([np.mean(q.cost) if q.cost else 1.0 for q in bank.questions]))
    statics = answer_statics(bank)
    feats, corr, ans, costc, qidx, orders = [], [], [], [], [], []
    for qi, q in enumerate(bank.questions):
        n = len(q.answers)
        if n < budget:
            from ...core.errors import OrchestraceError

            raise OrchestraceError(
                "OT612", f"question {q.id!r} has {n} samples, fewer than the budget {budget}"
            )
        for k in range(perms):
            order = np.arange(n)[:budget] if k == 0 else rng.permutation(n)[:budget]
            pt = replay_table(q, order, statics[qi])
            f = features(pt, budget, mean_cost, aggregator, confidence)
            rows = pts - 1
            if weighted:
                local = confidence_leader(pt)
            elif aggregator is not None:
                local = aggregator.answers(pt.counts, pt.valid, pt.static)
            else:
                local = pt.majority
            assert pt.ids is not None
            maj = np.append(pt.ids, NULL)[local[rows]]  # NULL (-1) picks the appended NULL
            feats.append(f[rows])
            ans.append(maj)
            if q.has_truth:
                corr.append(np.append(q.answer_correct.astype(bool), False)[maj])  # NULL: wrong
            else:  # no gold and no per-sample labels: agreement with the full-budget majority
                full = pt.ids[pt.majority[-1]] if pt.majority[-1] != NULL else NULL
                corr.append((maj == full) & (maj != NULL))
            costc.append(pt.cost[rows])
            qidx.append(qi)
            orders.append(order)
    return EpisodePool(
        bank=bank,
        budget=budget,
        perms=perms,
        points=pts,
        feats=np.stack(feats),
        correct=np.stack(corr),
        answer=np.stack(ans),
        costcum=np.stack(costc),
        question=np.array(qidx),
        order=np.stack(orders),
        aggregator=aggregator,
        confidence=confidence,
        weighted=weighted,
    )


def pool_trace(
    pool: EpisodePool,
    e: int,
    step: int,
    cost_coef: float,
    stop_probs: list[float] | None = None,
    tag: str = "",
) -> Trace:
    """Trace of pool episode e stopped at decision index ``step``."""
    q = pool.bank.questions[int(pool.question[e])]
    order = pool.order[e]
    samples = [q.samples[i] for i in order]
    costs = [q.sample_cost(int(i)) for i in order]
    a = int(pool.answer[e, step])
    return episode_trace(
        task_id=q.id,
        episode=f"stopvote-{q.id}-{e}{tag}",
        samples=samples,
        costs=costs,
        points=pool.points,
        n_used=int(pool.points[step]),
        answer=None if a == NULL else q.labels[a],
        correct=bool(pool.correct[e, step]),
        cost_coef=cost_coef,
        stop_probs=stop_probs,
        aggregator=pool.aggregator,
    )


@dataclass
class Rollout:
    """A batch of finished episodes: decisions taken at steps 0..length-1 of each."""

    episodes: np.ndarray  # [N]
    stop_step: np.ndarray  # [N] decision index where the episode stopped
    actions: np.ndarray  # [N, D] 1 = stop (valid up to stop_step, where forced stops are excluded)
    mask: np.ndarray  # [N, D] True where the policy acted
    reward: np.ndarray  # [N] trace reward
    reward_to_go: np.ndarray  # [N, D] reward from each decision on (sunk cost excluded)
    traces: list[Trace] | None


def rollout(
    pool: EpisodePool,
    stop_prob: Callable[[np.ndarray], np.ndarray],
    episodes: np.ndarray,
    rng: np.random.Generator,
    cost_coef: float,
    *,
    greedy: bool = False,
    trace_frac: float = 1.0,
    keep_traces: bool = False,
) -> Rollout:
    """Run episodes with a Markov policy (stop probabilities from features) and reward them.

    The reward of an episode is ``reward.stop.stop_reward`` of its trace. Building a trace costs about
    as much as the rest of a training step, so with ``trace_frac < 1`` only that fraction of
    episodes (chosen at random) gets a trace; the others take the same quantity from the
    pool's arrays, and every traced episode checks that both agree (a mismatch is a bug).
    With ``trace_frac`` 0 no trace is built and ``rng`` is drawn only for the actions.
    """
    feats = pool.feats[episodes]  # [N, D, F]
    n, d, _ = feats.shape
    p = stop_prob(feats.reshape(n * d, -1)).reshape(n, d)
    act = (p >= 0.5) if greedy else (rng.random((n, d)) < p)
    act[:, -1] = True  # the budget is exhausted: forced stop
    stop_step = act.argmax(axis=1)
    mask = np.arange(d)[None, :] <= stop_step[:, None]
    mask[:, -1] = False  # no decision at the budget
    rows = np.arange(n)
    rewards = pool.correct[episodes, stop_step] - cost_coef * pool.costcum[episodes, stop_step]
    if trace_frac <= 0:
        traced = rows[:0]  # no trace and no draw: the generator's stream is as with trace_frac 1
    else:
        traced = np.flatnonzero(rng.random(n) < trace_frac) if trace_frac < 1 else rows
    traces: list[Trace] = []
    for i in traced.tolist():
        s = int(stop_step[i])
        tr = pool_trace(pool, int(episodes[i]), s, cost_coef, stop_probs=p[i, : s + 1].tolist())
        r = stop_reward(tr, cost_coef)
        if abs(r - rewards[i]) > 1e-6:
            raise AssertionError(f"trace reward {r} != array reward {rewards[i]} (episode {episodes[i]})")
        rewards[i] = r
        if keep_traces:
            traces.append(tr)
    sunk = pool.costcum[episodes]  # cost already paid at each decision
    rtg = rewards[:, None] + cost_coef * sunk
    return Rollout(
        episodes, stop_step, act.astype(np.int64), mask, rewards, rtg, traces if keep_traces else None
    )
