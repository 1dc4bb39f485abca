"""Task-agnostic features of a voting prefix (the trace prefix of a StopVote episode).

Every feature is a function of the answer counts seen so far, the number of samples and their
cost, never of the answer strings, so a policy trained on one task family applies to another.
The ``counts+confidence`` feature set adds ``CONF_FEATURE_NAMES``, read from each sample's token
log-probabilities (a bank's ``logprob``, a trace's ``orchestrace.logprob_*`` attributes): votes
weighted by the per-token probability (as the confidence rules weight them), the leader's gap to
the other answers and its within-prefix rank. Every one reads only the samples drawn so far for
this question: the probability level differs by family, and normalising by a family's statistics
would need samples a deployment on a new family has not drawn (issue 17's no-free-samples rule).
All prefixes of one answer sequence are computed at once (``PrefixTable``), vectorised over t.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import betainc

from ...core.errors import OrchestraceError
from ...runtime.backends.base import LogprobSummary
from .aggregate import AGG_FEATURE_NAMES, Aggregator
from .banks import NULL, BankQuestion

FEATURE_NAMES: tuple[str, ...] = (
    "samples_frac",  # t / budget
    "top1_share",  # v1 / valid
    "top2_share",  # v2 / valid
    "margin_z",  # (v1 - v2) / sqrt(valid)
    "entropy",  # Shannon entropy of the valid answers / log(budget)
    "distinct_share",  # distinct answers / valid
    "null_share",  # unparsable samples / t
    "cost_frac",  # cost so far / (budget x mean sample cost)
    "beta_conf",  # P(p1 > 0.5 | v1, v2), uniform prior (the Adaptive-Consistency statistic)
    "log_top1",  # log1p(v1) / log1p(budget)
    "log_top2",  # log1p(v2) / log1p(budget)
    "log_margin",  # log1p(v1 - v2) / log1p(budget)
)
N_FEATURES = len(FEATURE_NAMES)

# p_i = exp(mean token log-prob of sample i), the model's per-token probability of what it said;
# L = the majority answer (what the policy answers); samples without log-probabilities never count
CONF_FEATURE_NAMES: tuple[str, ...] = (
    "conf_share",  # sum of p_i over L's samples / sum over all voting samples
    "conf_margin",  # (that sum for L - the largest for another answer) / sqrt(valid)
    "conf_agrees",  # 1 if the p-weighted leader is L (ties: the answer seen first)
    "conf_gap_mean",  # mean p_i of L's samples - mean p_i of the others' (0 if either has none)
    "conf_gap_min",  # the same with exp(min token log-prob)
    "conf_rank",  # mean percentile of L's samples' mean log-prob among the prefix's (0.5: none)
    "conf_lead_margin",  # log1p(the p-weighted leader's lead over the runner-up) / log1p(budget)
)
FEATURE_SETS = ("counts", "counts+confidence")  # ``PolicyConfig.feature_set``


@dataclass
class PrefixTable:
    """Statistics of every prefix 1..T of one answer sequence (row t-1 describes the first t).

    ``answers`` are ids in order of first appearance (so argmax ties go to the earliest answer,
    as ``Counter.most_common`` does); NULL samples are counted in t but never vote.
    """

    answers: np.ndarray  # [T] int
    counts: np.ndarray  # [T, A] cumulative votes per answer id
    v1: np.ndarray  # [T] top count
    v2: np.ndarray  # [T] second count (0 if fewer than two answers)
    valid: np.ndarray  # [T] non-null samples so far
    distinct: np.ndarray  # [T]
    majority: np.ndarray  # [T] majority answer id (NULL if no valid sample yet)
    cost: np.ndarray  # [T] cumulative cost
    static: np.ndarray | None = None  # [A, 2] per-answer prior and echo (``aggregate.answer_statics``)
    ids: np.ndarray | None = None  # [A] the bank question's answer id of each id here
    logprob: np.ndarray | None = None  # [T, 2] each sample's mean and min token log-prob (NaN: none)
    feature_cache: dict[tuple[int, tuple[float, ...] | None, bool], np.ndarray] = field(
        default_factory=dict, repr=False, compare=False
    )  # ``replay_features`` by (budget, aggregator weights, confidence)

    @property
    def length(self) -> int:
        return len(self.answers)


def relabel(answers: np.ndarray) -> np.ndarray:
    """Renumber answer ids by first appearance in this sequence (NULL stays NULL)."""
    return _first_seen(answers)[0]


def _first_seen(answers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(answers renumbered by first appearance, the distinct answers in that order), vectorised:
    the main job relabels every replayed order of every question."""
    out = np.full(len(answers), NULL, dtype=np.int64)
    ok = answers != NULL
    uniq, first, inverse = np.unique(answers[ok], return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), dtype=np.int64)
    rank[by_first] = np.arange(len(uniq))
    out[ok] = rank[inverse.reshape(-1)]
    return out, uniq[by_first].astype(np.int64)


def replay_table(q: BankQuestion, order: np.ndarray, static: np.ndarray | None = None) -> PrefixTable:
    """Prefix table of question ``q`` drawn in ``order`` (ids relabelled by first appearance;
    ``ids`` maps them back to the question's answer ids)."""
    relabelled, ids = _first_seen(q.answers[order])
    cost = None if q.cost is None else np.asarray(q.cost, float)[order]
    pt = prefix_table(relabelled, cost)
    pt.ids = ids
    pt.static = None if static is None else static[ids]
    if q.logprob is not None:
        pt.logprob = logprob_array(q.logprob)[order]
    return pt


def logprob_array(lp: Sequence[LogprobSummary | None]) -> np.ndarray:
    """[T, 2] each sample's mean and min token log-prob (NaN where it has none)."""
    nan = (np.nan, np.nan)
    return np.array([nan if x is None else (x.mean, x.min) for x in lp], dtype=float).reshape(-1, 2)


def prefix_table(answers: np.ndarray, cost: np.ndarray | None = None) -> PrefixTable:
    """All prefix statistics of ``answers`` (ids must be in order of first appearance)."""
    t = len(answers)
    n_ans = int(answers.max()) + 1 if t and answers.max() >= 0 else 0
    onehot = np.zeros((t, max(n_ans, 1)), dtype=np.int32)
    ok = answers != NULL
    onehot[np.nonzero(ok)[0], answers[ok]] = 1
    counts = np.cumsum(onehot, axis=0)
    if counts.shape[1] >= 2:
        part = -np.partition(-counts, 1, axis=1)
        v1, v2 = part[:, 0], part[:, 1]
    else:
        v1, v2 = counts[:, 0], np.zeros(t, dtype=np.int32)
    valid = np.cumsum(ok)
    majority = np.where(valid > 0, counts.argmax(axis=1), NULL)
    c = np.ones(t) if cost is None else np.asarray(cost, dtype=float)
    return PrefixTable(
        answers=answers,
        counts=counts,
        v1=v1.astype(np.int64),
        v2=v2.astype(np.int64),
        valid=valid.astype(np.int64),
        distinct=(counts > 0).sum(axis=1),
        majority=majority.astype(np.int64),
        cost=np.cumsum(c),
    )


def beta_confidence(v1: np.ndarray, v2: np.ndarray) -> np.ndarray:
    """P(p1 > 0.5) for p1 ~ Beta(v1 + 1, v2 + 1), i.e. I_0.5(v2 + 1, v1 + 1)."""
    return betainc(np.asarray(v2, float) + 1.0, np.asarray(v1, float) + 1.0, 0.5)


def features(
    pt: PrefixTable,
    budget: int,
    mean_cost: float = 1.0,
    aggregator: Aggregator | None = None,
    confidence: bool = False,
) -> np.ndarray:
    """[T, N_FEATURES] float32 features of every prefix of ``pt`` (plus the three
    ``AGG_FEATURE_NAMES`` of a learned aggregator, which needs ``pt.static``, then with
    ``confidence`` the ``CONF_FEATURE_NAMES``, which need ``pt.logprob``)."""
    t = np.arange(1, pt.length + 1, dtype=float)
    valid = np.maximum(pt.valid, 1).astype(float)
    p = pt.counts / valid[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
    lb = np.log1p(budget)
    margin = (pt.v1 - pt.v2).astype(float)
    out = np.stack(
        [
            t / budget,
            pt.v1 / valid,
            pt.v2 / valid,
            margin / np.sqrt(valid),
            ent / np.log(budget),
            pt.distinct / valid,
            (t - pt.valid) / t,
            pt.cost / (budget * mean_cost),
            beta_confidence(pt.v1, pt.v2),
            np.log1p(pt.v1) / lb,
            np.log1p(pt.v2) / lb,
            np.log1p(margin) / lb,
        ],
        axis=1,
    ).astype(np.float32)
    if aggregator is not None:
        if pt.static is None:
            raise ValueError("a learned aggregator needs the per-answer statics of the prefix table")
        out = np.concatenate([out, aggregator.features(pt.counts, pt.valid, pt.static)], axis=1)
    if confidence:
        out = np.concatenate([out, confidence_features(pt, budget)], axis=1)
    return out


def confidence_counts(pt: PrefixTable, which: str = "mean") -> np.ndarray:
    """[T, A] cumulative confidence-weighted votes: each sample votes with exp of its mean (or
    min) token log-probability, the model's own probability per token (DeepConf, Fu et al. 2025,
    weights votes by token confidence; we have only the sampled tokens' log-probabilities)."""
    if pt.logprob is None:
        raise ValueError("confidence rules need a bank with per-sample log-probabilities")
    w = np.exp(pt.logprob[:, 0 if which == "mean" else 1])
    ok = pt.answers != NULL
    w = np.where(ok & np.isfinite(w), w, 0.0)
    onehot = np.zeros(pt.counts.shape, dtype=float)
    onehot[np.nonzero(ok)[0], pt.answers[ok]] = w[ok]
    return np.cumsum(onehot, axis=0)


def confidence_leader(pt: PrefixTable, which: str = "mean") -> np.ndarray:
    """[T] the confidence-weighted leader after each prefix (ties: the answer seen first), the
    majority where no sample so far carries weight."""
    c = confidence_counts(pt, which)
    return np.where(c.max(axis=1) > 0, c.argmax(axis=1), pt.majority)


def top_two(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The largest and second-largest entry of each row of ``c`` (0 when it has one column)."""
    if c.shape[1] < 2:
        return c[:, 0], np.zeros(len(c))
    part = -np.partition(-c, 1, axis=1)
    return part[:, 0], part[:, 1]


def confidence_features(pt: PrefixTable, budget: int) -> np.ndarray:
    """[T, 7] ``CONF_FEATURE_NAMES`` of every prefix; refuses a table without log-probabilities
    (one whose samples so far are all null may have none yet: nothing votes)."""
    if pt.logprob is None:
        raise OrchestraceError(
            "OT624",
            "this stop policy's feature set (counts+confidence) reads token log-probabilities, and "
            "these samples have none (record them: run --logprobs, bank build --logprobs)",
        )
    t_len, n_ans = pt.counts.shape
    ok = (pt.answers != NULL) & np.isfinite(pt.logprob[:, 0])
    p_mean = np.where(ok, np.exp(np.where(ok, pt.logprob[:, 0], 0.0)), 0.0)
    p_min = np.where(ok, np.exp(np.where(ok, pt.logprob[:, 1], 0.0)), 0.0)
    ans = np.where(ok, pt.answers, 0)
    w = confidence_counts(pt)  # [T, A] p-weighted votes
    lead = np.maximum(pt.majority, 0)
    rows = np.arange(t_len)
    w_lead = np.where(pt.majority != NULL, w[rows, lead], 0.0)
    others = w.copy()
    others[rows, lead] = -np.inf
    w_other = np.maximum(others.max(axis=1), 0.0) if n_ans > 1 else np.zeros(t_len)
    total = w.sum(axis=1)
    # [t, i]: sample i is among the first t + 1, voting with a log-prob, for L (or for another)
    upto = np.tri(t_len, dtype=bool)
    is_lead = upto & ok[None, :] & (ans[None, :] == lead[:, None]) & (pt.majority[:, None] != NULL)
    is_other = upto & ok[None, :] & ~is_lead

    def gap(p: np.ndarray) -> np.ndarray:
        n1, n2 = is_lead.sum(axis=1), is_other.sum(axis=1)
        m1 = (is_lead * p).sum(axis=1) / np.maximum(n1, 1)
        m2 = (is_other * p).sum(axis=1) / np.maximum(n2, 1)
        return np.where((n1 > 0) & (n2 > 0), m1 - m2, 0.0)

    # percentile of sample i among the first t + 1 samples' mean log-probs (ties count half)
    m = np.where(ok, pt.logprob[:, 0], 0.0)
    below = (m[None, :] < m[:, None]) & ok[None, :]  # [i, j]: j is below i
    tied = (m[None, :] == m[:, None]) & ok[None, :] & ~np.eye(t_len, dtype=bool)
    score = np.cumsum(below + 0.5 * tied, axis=1).T  # [t, i]
    n_ok = np.cumsum(ok)
    pct = np.where(n_ok[:, None] > 1, score / np.maximum(n_ok - 1, 1)[:, None], 0.5)
    first, second = top_two(w)
    lead_margin = first - second
    n_lead = is_lead.sum(axis=1)
    rank = np.where(n_lead > 0, (is_lead * pct).sum(axis=1) / np.maximum(n_lead, 1), 0.5)
    return np.stack(
        [
            np.where(total > 0, w_lead / np.where(total > 0, total, 1.0), 0.0),
            (w_lead - w_other) / np.sqrt(np.maximum(pt.valid, 1)),
            ((total > 0) & (w.argmax(axis=1) == lead)).astype(float),
            gap(p_mean),
            gap(p_min),
            rank,
            np.log1p(lead_margin) / np.log1p(budget),
        ],
        axis=1,
    ).astype(np.float32)


def replay_features(
    pt: PrefixTable, budget: int, aggregator: Aggregator | None = None, confidence: bool = False
) -> np.ndarray:
    """``features`` of a replayed table (mean cost 1), computed once per budget, aggregator and
    feature set: every policy of a cost sweep and of a budget search replays the same tables."""
    key = (budget, None if aggregator is None else tuple(aggregator.weights), confidence)
    f = pt.feature_cache.get(key)
    if f is None:
        f = pt.feature_cache[key] = features(pt, budget, aggregator=aggregator, confidence=confidence)
        f.flags.writeable = False
    return f


def feature_names(aggregator: bool, confidence: bool = False) -> list[str]:
    return (
        list(FEATURE_NAMES)
        + (list(AGG_FEATURE_NAMES) if aggregator else [])
        + (list(CONF_FEATURE_NAMES) if confidence else [])
    )


def answer_ids(answers: Sequence[str | None]) -> np.ndarray:
    """Answers (strings, None for a null sample) as ids by first appearance: what features see."""
    seen: dict[str, int] = {}
    return np.array([NULL if a is None else seen.setdefault(a, len(seen)) for a in answers], dtype=np.int64)


def prefix_features(
    answers: Sequence[str | None],
    budget: int,
    cost: Sequence[float] | None = None,
    mean_cost: float = 1.0,
    logprob: Sequence[LogprobSummary | None] | None = None,
    confidence: bool = False,
) -> np.ndarray:
    """Features of a trace prefix: the workers' answers so far, in order (with ``confidence``,
    their token log-probabilities too). The same :func:`prefix_table` and :func:`features` as
    training and offline evaluation, on one prefix."""
    if not answers:
        raise ValueError("features need at least one answer")
    pt = prefix_table(answer_ids(answers), None if cost is None else np.asarray(cost, float))
    pt.logprob = None if logprob is None else logprob_array(logprob)
    return features(pt, budget, mean_cost, confidence=confidence)[-1]


def features_hash(x: np.ndarray) -> str:
    """Short hash of a feature vector's float32 bytes (equal hashes: bit-identical features)."""
    return hashlib.sha256(np.ascontiguousarray(x, dtype=np.float32).tobytes()).hexdigest()[:16]
