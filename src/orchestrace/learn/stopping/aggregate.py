"""Learned weighted aggregation (O4): which of the answers seen so far to return.

Majority vote scores a candidate answer by its votes alone. Two more task-agnostic signals
are cheap and real on small models:

- the answer prior: the share of questions whose samples contain this answer string
  (unlabelled; in-bank it counts the question itself, so ``train stop`` reads it from a disjoint
  calibration split, ``answer_statics(bank, reference)``). An answer the model gives to many
  questions ("india", "nice") is an attractor, not evidence;
- the echo: the answer string appears in the question itself ("polite" -> "polite").

The aggregator is a conditional logit over the voted candidates,
``score(a) = w . [log1p(votes_a), votes_a / valid, log prior_a, echo_a, log prior_a x conc]``
(conc: the family's answer concentration, see ``answer_statics``), fitted by maximum likelihood
(the probability of returning a correct candidate) on prefixes of permuted training questions.
Majority vote is the special case ``w = [1, 0, 0, 0, 0]`` (ties to the first answer).
It also supplies the stopping policy three features of its own posterior.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...core.paths import make_dirs
from .banks import NULL, Bank, BankQuestion

CAND_FEATURES: tuple[str, ...] = ("log_votes", "vote_share", "log_prior", "echo", "log_prior_x_concentration")
AGG_FEATURE_NAMES: tuple[str, ...] = (
    "agg_top_prob",  # softmax probability of the aggregator's answer among voted candidates
    "agg_margin",  # score gap between the best two candidates (0 with one candidate)
    "agg_leader_prior",  # prior share of the aggregator's answer (see ``answer_statics``)
)
MAJORITY = (1.0, 0.0, 0.0, 0.0, 0.0)


def echoes(label: str, question: str) -> bool:
    """Whether an answer string appears as whole words in the question text (not inside a
    longer word: no word character, as regex ``\\w``, touches it). Plain ``str.find``: a regex per
    label missed the pattern cache and cost 6% of the main job."""
    needle, text = label.lower(), question.lower()
    end = len(text)
    i = text.find(needle)
    while i >= 0:
        j = i + len(needle)
        if (i == 0 or not _is_word(text[i - 1])) and (j == end or not _is_word(text[j])):
            return True
        i = text.find(needle, i + 1)
    return False


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def answer_statics(bank: Bank, reference: Bank | None = None) -> list[np.ndarray]:
    """Per question, ``[labels, 3]``: log leave-one-out prior, echo flag, and the prior times the
    family's answer concentration (the share of all its valid samples on its 10 commonest
    answers). Attractors are wrong where answers are question-specific (antonyms: a concentration
    of 0.11) and right where a few answers serve every question (continents: 0.86); the product
    lets one weight vector learn both. Computed per family: a merged bank (``part_of`` in its
    meta, set by ``stop.merge``) gets each part's own statistics.

    With ``reference`` (a split of other questions whose samples are drawn and counted
    separately), the prior and the concentration come from its samples only, part by part, so
    nothing a policy is scored on feeds a statistic it uses: the evaluated questions' own
    samples then only give the echo flag (which reads the question text)."""
    part_of = bank.meta.get("part_of") or [0] * len(bank)
    ref_part = (reference.meta.get("part_of") or [0] * len(reference)) if reference is not None else []
    out: list[np.ndarray] = [np.zeros((0, 3))] * len(bank)
    for part in sorted(set(part_of)):
        idx = [i for i, p in enumerate(part_of) if p == part]
        qs = [bank.questions[i] for i in idx]
        source = qs
        if reference is not None:
            source = [q for q, p in zip(reference.questions, ref_part, strict=True) if p == part]
            if not source:
                raise ValueError(f"reference bank has no questions of part {part} (part_of in its meta)")
        for i, st in zip(idx, _family_statics(qs, source, add_one=reference is not None), strict=True):
            out[i] = st
    return out


def _family_statics(
    questions: Sequence[BankQuestion], source: Sequence[BankQuestion], add_one: bool
) -> list[np.ndarray]:
    """Statics of ``questions`` with the prior and concentration counted over ``source``; with
    ``add_one`` (a disjoint source) the prior counts the question itself once, ``(seen + 1) /
    (n + 1)``, the same form the in-bank prior has (a question always contains its own answers)."""
    prior = answer_prior(source)
    return [candidate_statics(q.labels, q.question, prior, add_one) for q in questions]


@dataclass(frozen=True)
class AnswerPrior:
    """A family's answer statistics over reference questions: on how many of them each answer
    string was sampled, of how many, and the family's answer concentration. Saved with a learned
    aggregator so a live run (one question, no bank) computes the statics offline evaluation used."""

    seen: dict[str, int]
    questions: int
    concentration: float


def answer_prior(source: Sequence[BankQuestion]) -> AnswerPrior:
    seen: Counter[str] = Counter()
    votes: Counter[str] = Counter()
    for q in source:
        seen.update(q.labels)
        counts = np.bincount(q.answers[q.answers != NULL], minlength=len(q.labels))
        votes.update({a: int(c) for a, c in zip(q.labels, counts, strict=True)})
    concentration = sum(c for _, c in votes.most_common(10)) / max(sum(votes.values()), 1)
    return AnswerPrior(dict(seen), len(source), concentration)


def priors_to_json(priors: dict[str, AnswerPrior]) -> dict[str, dict]:
    """Answer priors per family as saved in policy files (the aggregator's, an -agg stop policy's)."""
    return {
        f: {"seen": dict(sorted(p.seen.items())), "questions": p.questions, "concentration": p.concentration}
        for f, p in sorted(priors.items())
    }


def priors_from_json(d: dict) -> dict[str, AnswerPrior]:
    """:func:`priors_to_json`'s inverse (KeyError, TypeError, ValueError, AttributeError on a bad dict)."""
    return {
        fam: AnswerPrior(
            {str(k): int(v) for k, v in p["seen"].items()}, int(p["questions"]), float(p["concentration"])
        )
        for fam, p in d.items()
    }


def candidate_statics(labels: Sequence[str], question: str, prior: AnswerPrior, add_one: bool) -> np.ndarray:
    """``[labels, 3]`` statics of one question's answers (see ``answer_statics``); ``add_one``: the
    question is not among the prior's reference questions (a held-out or live question)."""
    if not labels:
        return np.zeros((0, 3))
    n = max(prior.questions, 1) + add_one
    lp = np.log(np.array([(prior.seen.get(a, 0) + add_one) / n for a in labels], dtype=float))
    echo = np.array([echoes(a, question) for a in labels], dtype=float)
    return np.stack([lp, echo, lp * prior.concentration], axis=1)


def candidate_features(counts: np.ndarray, valid: np.ndarray, static: np.ndarray) -> np.ndarray:
    """``[T, A, 5]`` ``CAND_FEATURES`` of every prefix's candidates (``counts`` [T, A] votes,
    ``valid`` [T] non-null samples, ``static`` [A, 3]): what the aggregator is fitted on and
    what a live decision's feature hash covers."""
    v = counts.astype(float)
    stat = np.zeros((v.shape[1], 3))
    stat[: len(static)] = static[: v.shape[1]]
    return np.stack(
        [np.log1p(v), v / np.maximum(valid, 1)[:, None]]
        + [np.broadcast_to(stat[:, j], v.shape) for j in range(3)],
        axis=2,
    )


@dataclass(frozen=True)
class Aggregator:
    """Candidate weights over ``CAND_FEATURES``."""

    weights: tuple[float, ...] = MAJORITY

    def scores(self, counts: np.ndarray, valid: np.ndarray, static: np.ndarray) -> np.ndarray:
        """[T, A] candidate scores (-inf for answers without a vote) of every prefix."""
        w = np.zeros(len(CAND_FEATURES))
        w[: len(self.weights)] = self.weights  # weights saved before a feature existed weigh it 0
        v = counts.astype(float)
        s = w[0] * np.log1p(v) + w[1] * v / np.maximum(valid, 1)[:, None]
        st = np.zeros((v.shape[1], len(CAND_FEATURES) - 2))
        st[: len(static), : static.shape[1]] = static[: v.shape[1]]
        s = s + (st @ w[2:])[None, :]
        return np.where(v > 0, s, -np.inf)

    def answers(self, counts: np.ndarray, valid: np.ndarray, static: np.ndarray) -> np.ndarray:
        """[T] answer ids (NULL before the first valid sample); ties go to the first answer."""
        s = self.scores(counts, valid, static)
        return np.where(valid > 0, s.argmax(axis=1), NULL)

    def features(self, counts: np.ndarray, valid: np.ndarray, static: np.ndarray) -> np.ndarray:
        """[T, 3] ``AGG_FEATURE_NAMES`` of every prefix."""
        s = self.scores(counts, valid, static)
        t = len(valid)
        top = s.argmax(axis=1)
        best = s[np.arange(t), top]
        finite = np.isfinite(best)
        z = np.exp(np.where(np.isfinite(s), s - np.where(finite, best, 0)[:, None], -np.inf))
        second = (
            np.partition(np.where(np.isfinite(s), s, -1e9), -2, axis=1)[:, -2] if s.shape[1] > 1 else best
        )
        with np.errstate(divide="ignore", invalid="ignore"):  # prefixes with no valid sample: masked
            prob = np.where(finite, 1.0 / z.sum(axis=1), 0.0)
            margin = np.where(finite & (second > -1e8), best - second, 0.0)
        prior = np.exp(np.concatenate([static[:, 0], np.zeros(max(s.shape[1] - len(static), 0))]))
        lead_prior = np.where(finite, prior[top], 0.0)
        return np.stack([prob, np.minimum(margin, 10.0) / 10.0, lead_prior], axis=1).astype(np.float32)

    def to_dict(self) -> dict[str, list[float]]:
        return {"weights": list(self.weights), "features": list(CAND_FEATURES)}

    @classmethod
    def from_dict(cls, d: dict) -> Aggregator:
        return cls(tuple(float(x) for x in d["weights"]))


def _candidates(bank: Bank, budget: int, orders: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate features [N, A, 4], masks and correctness of every prefix of random orders."""
    rng = np.random.default_rng(seed)
    width = max(len(q.labels) for q in bank.questions)
    xs, ms, ys = [], [], []
    for q, st in zip(bank.questions, answer_statics(bank), strict=True):
        if not q.answer_correct.any():
            continue  # no candidate can be right: nothing to learn from this question
        for _ in range(orders):
            a = q.answers[rng.permutation(len(q.answers))[:budget]]
            ok = a != NULL
            onehot = np.zeros((len(a), width))
            onehot[np.nonzero(ok)[0], a[ok]] = 1
            v = np.cumsum(onehot, axis=0)
            x = candidate_features(v, np.cumsum(ok), st)
            corr = np.zeros(width, dtype=bool)
            corr[: len(q.labels)] = q.answer_correct
            xs.append(x)
            ms.append(v > 0)
            ys.append((v > 0) & corr[None, :])
    x, mask, y = np.concatenate(xs), np.concatenate(ms), np.concatenate(ys)
    keep = y.any(axis=1)
    return x[keep], mask[keep], y[keep]


def fit_aggregator(
    banks: Sequence[Bank], budget: int = 40, orders: int = 4, seed: int = 0, l2: float = 1e-3
) -> Aggregator:
    """Maximum likelihood of returning a correct candidate, on every prefix of ``orders``
    random orders of each training question (deterministic for a seed)."""
    from scipy.optimize import minimize

    parts = [_candidates(b, budget, orders, seed) for b in banks]
    width = max(p[0].shape[1] for p in parts)

    def pad(a: np.ndarray) -> np.ndarray:
        return np.pad(a, [(0, 0), (0, width - a.shape[1])] + [(0, 0)] * (a.ndim - 2))

    x = np.concatenate([pad(p[0]) for p in parts])
    mask = np.concatenate([pad(p[1]) for p in parts])
    y = np.concatenate([pad(p[2]) for p in parts])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        s = np.where(mask, x @ w, -np.inf)
        s = s - s.max(axis=1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=1, keepdims=True)
        pc = np.where(y, p, 0).sum(axis=1)
        q = np.where(y, p, 0) / pc[:, None]  # posterior over which correct candidate
        grad = ((p - q)[:, :, None] * x).sum(axis=1).mean(axis=0)
        return float(-np.log(pc + 1e-12).mean() + l2 * w @ w), grad + 2 * l2 * w

    res = minimize(loss, np.array(MAJORITY), jac=True, method="L-BFGS-B")
    return Aggregator(tuple(round(float(v), 6) for v in res.x))


def save_aggregator(path: str, agg: Aggregator, priors: dict[str, AnswerPrior]) -> list[str]:
    """The aggregator as a policy file: ``X.safetensors`` (the weights; header key
    ``orchestrace.decision`` = ``aggregate``) and ``X.json`` (weights, feature names and the answer
    priors per family, which a live run needs for the statics)."""
    import json
    import os

    from safetensors.numpy import save as tensor_bytes

    base = path.removesuffix(".safetensors").removesuffix(".json")
    cfg = json.dumps(
        {
            **agg.to_dict(),
            "priors": priors_to_json(priors),
        },
        indent=2,
        sort_keys=True,
    )
    if d := os.path.dirname(base):
        make_dirs(d)
    with open(base + ".safetensors", "wb") as f:
        w = np.array(agg.weights, dtype=np.float64)
        f.write(
            tensor_bytes(
                {"weights": w}, metadata={"orchestrace.aggregator": cfg, "orchestrace.decision": "aggregate"}
            )
        )
    with open(base + ".json", "w") as f:
        f.write(cfg + "\n")
    return [base + ".safetensors", base + ".json"]


def load_aggregator(path: str) -> tuple[Aggregator, dict[str, AnswerPrior]]:
    """An aggregator file written by ``save_aggregator`` (the weights from the safetensors, the priors
    from the JSON beside it or the header); a clear error naming the file otherwise."""
    import json
    import os

    from safetensors import safe_open

    from ...core.errors import BadInput

    base = path.removesuffix(".safetensors").removesuffix(".json")
    st = base + ".safetensors"
    try:
        with safe_open(st, framework="numpy") as f:
            meta = f.metadata() or {}
            weights = f.get_tensor("weights")
    except Exception as e:  # safetensors raises its own error types for corrupt files
        raise BadInput("OT621", f"not an aggregator safetensors file: {e}", path=st) from None
    text = meta.get("orchestrace.aggregator")
    if os.path.isfile(base + ".json"):
        with open(base + ".json") as f:
            text = f.read()
    try:
        cfg = json.loads(text or "")
        if list(cfg["features"]) != list(CAND_FEATURES) or len(weights) != len(CAND_FEATURES):
            raise ValueError(f"features {cfg['features']}, expected {list(CAND_FEATURES)}")
        priors = priors_from_json(cfg["priors"])
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
        raise BadInput("OT622", f"bad aggregator config: {e}", path=base + ".json") from None
    return Aggregator(tuple(float(x) for x in weights)), priors
