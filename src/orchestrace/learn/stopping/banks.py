"""Sample banks: the data ``StopVote`` replays.

Format (JSONL, one question per line, optionally ``.gz``)::

    {"id": str, "question": str, "gold": str | null, "samples": [str | null, ...],
     "correct": [bool, ...] (optional), "cost": [number, ...] (optional),
     "logprob": [{"mean": number, "min": number, "tokens": int} | null, ...] (optional)}

A null sample is an unparsable answer. ``correct[i]`` says whether sample i is right (used when
``gold`` is null); ``cost[i]`` is the cost of drawing sample i (default 1 per sample);
``logprob[i]`` summarises the model's token log-probabilities of sample i (null: not given).

Banks come from three places: files (``load_bank``), the calibrated synthetic generator
(``synthetic_bank``, parameters in ``SynthParams``) and a real model (``sampling.build_bank``).
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Any

import msgspec
import numpy as np
import orjson

from ...core.errors import BadInput, OrchestraceError
from ...runtime.backends.base import LogprobSummary

NULL = -1


@dataclass
class BankQuestion:
    """One question of a bank; ``answers`` are integer answer ids (``NULL`` for null samples)."""

    id: str
    question: str
    gold: str | None
    samples: list[str | None]
    correct: list[bool] | None = None
    cost: list[float] | None = None
    logprob: list[LogprobSummary | None] | None = None
    answers: np.ndarray = field(init=False, repr=False)
    labels: list[str] = field(init=False, repr=False)
    answer_correct: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.labels = list(dict.fromkeys(s for s in self.samples if s is not None))
        index = {a: i for i, a in enumerate(self.labels)}
        self.answers = np.array([NULL if s is None else index[s] for s in self.samples], dtype=np.int64)
        ok = np.zeros(len(self.labels), dtype=bool)
        if self.gold is not None:
            ok = np.array([a == self.gold for a in self.labels], dtype=bool)
        elif self.correct is not None:
            for a, c in zip(self.answers.tolist(), self.correct, strict=True):
                if a != NULL and c:
                    ok[a] = True
        self.answer_correct = ok

    @property
    def has_truth(self) -> bool:
        return self.gold is not None or self.correct is not None

    def is_correct(self, answer: int) -> bool:
        """Whether an aggregated answer id is right (False for NULL, i.e. no answer)."""
        return answer != NULL and bool(self.answer_correct[answer])

    def sample_cost(self, i: int) -> float:
        return 1.0 if self.cost is None else float(self.cost[i])

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "question": self.question,
            "gold": self.gold,
            "samples": self.samples,
        }
        if self.correct is not None:
            d["correct"] = self.correct
        if self.cost is not None:
            d["cost"] = self.cost
        if self.logprob is not None:
            d["logprob"] = [None if x is None else msgspec.to_builtins(x) for x in self.logprob]
        return d


@dataclass
class Bank:
    name: str
    questions: list[BankQuestion]
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.questions)

    @property
    def min_samples(self) -> int:
        return min(len(q.samples) for q in self.questions)

    def subset(self, idx: Sequence[int], name: str | None = None) -> Bank:
        meta = dict(self.meta)
        if "part_of" in meta:  # which merged family each question came from
            meta["part_of"] = [meta["part_of"][i] for i in idx]
        return Bank(name or self.name, [self.questions[i] for i in idx], meta)


# ---------------------------------------------------------------- reading and writing


def _fail(msg: str, path: str, line: int | None = None, pointer: str | None = None) -> OrchestraceError:
    return BadInput("OT610", msg, path=path, line=line, pointer=pointer)


def _question_from(d: Any, path: str, line: int) -> BankQuestion:
    if not isinstance(d, dict):
        raise _fail("a bank line must be a JSON object", path, line)
    for key, kind in (("id", str), ("question", str), ("samples", list)):
        if key not in d:
            raise _fail(f"missing field {key!r}", path, line, f"/{key}")
        if not isinstance(d[key], kind):
            raise _fail(f"{key!r} must be a {kind.__name__}", path, line, f"/{key}")
    unknown = set(d) - {"id", "question", "gold", "samples", "correct", "cost", "logprob"}
    if unknown:
        raise _fail(f"unknown field(s) {sorted(unknown)}", path, line)
    gold = d.get("gold")
    if gold is not None and not isinstance(gold, str):
        raise _fail("'gold' must be a string or null", path, line, "/gold")
    samples = d["samples"]
    if not samples:
        raise _fail("'samples' is empty", path, line, "/samples")
    for i, s in enumerate(samples):
        if s is not None and not isinstance(s, str):
            raise _fail("a sample must be a string or null", path, line, f"/samples/{i}")
    correct = d.get("correct")
    if correct is not None:
        if not isinstance(correct, list) or len(correct) != len(samples):
            raise _fail("'correct' must be a list of booleans as long as 'samples'", path, line, "/correct")
        if not all(isinstance(c, bool) for c in correct):
            raise _fail("'correct' must hold booleans only", path, line, "/correct")
    cost = d.get("cost")
    if cost is not None:
        if not isinstance(cost, list) or len(cost) != len(samples):
            raise _fail("'cost' must be a list of numbers as long as 'samples'", path, line, "/cost")
        for i, c in enumerate(cost):
            if isinstance(c, bool) or not isinstance(c, int | float) or not np.isfinite(c) or c < 0:
                raise _fail("a cost must be a finite number >= 0", path, line, f"/cost/{i}")
    logprob = d.get("logprob")
    if logprob is not None:
        logprob = _logprobs_from(logprob, len(samples), path, line)
    return BankQuestion(d["id"], d["question"], gold, list(samples), correct, cost, logprob)


def _logprobs_from(raw: Any, n: int, path: str, line: int) -> list[LogprobSummary | None]:
    if not isinstance(raw, list) or len(raw) != n:
        raise _fail("'logprob' must be a list as long as 'samples'", path, line, "/logprob")
    out: list[LogprobSummary | None] = []
    for i, x in enumerate(raw):
        if x is None:
            out.append(None)
            continue
        try:
            s = msgspec.convert(x, LogprobSummary)
        except msgspec.ValidationError as e:
            raise _fail(
                f"a logprob must be {{mean, min, tokens}} or null: {e}", path, line, f"/logprob/{i}"
            ) from None
        if not (
            np.isfinite(s.mean) and np.isfinite(s.min) and s.mean <= 0 and s.min <= s.mean and s.tokens > 0
        ):
            raise _fail(
                "a logprob needs min <= mean <= 0 (finite) and tokens > 0", path, line, f"/logprob/{i}"
            )
        out.append(s)
    return out


def parse_bank(data: bytes, path: str, name: str | None = None) -> Bank:
    """Parse JSONL bytes; every problem names the file, the line and the field."""
    questions: list[BankQuestion] = []
    seen: dict[str, int] = {}
    data = data.removeprefix(b"\xef\xbb\xbf")  # one byte-order mark, as every reader accepts
    for n, raw in enumerate(data.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            d = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise _fail(f"not JSON: {e}", path, n) from None
        q = _question_from(d, path, n)
        if q.id in seen:
            raise _fail(f"duplicate id {q.id!r} (first on line {seen[q.id]})", path, n, "/id")
        seen[q.id] = n
        questions.append(q)
    if not questions:
        raise _fail("the bank holds no questions", path)
    base = os.path.basename(path)
    for suffix in (".gz", ".jsonl"):
        base = base.removesuffix(suffix)
    return Bank(name or base, questions, {"source": path})


def load_bank(path: str) -> Bank:
    """Load a ``.jsonl`` or ``.jsonl.gz`` bank, or an embedded default by name (``antonyms``)."""
    if not os.path.exists(path) and path in default_bank_names():
        return default_bank(path)
    if not os.path.exists(path):  # a typo in a name reads best with the names beside it
        raise OrchestraceError(
            "OT001",
            f"no such bank file, nor an embedded bank of that name ({', '.join(DEFAULT_BANKS)})",
            path=path,
        )
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise OrchestraceError("OT001", f"cannot read bank: {e.strerror}", path=path) from None
    if path.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:  # zlib.error: damage inside the stream (exit 3)
            raise OrchestraceError("OT007", f"corrupt gzip stream: {e}", path=path) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OrchestraceError("OT002", f"invalid UTF-8 at byte {e.start}", path=path) from None
    return parse_bank(data, path)


def dump_bank(questions: Iterable[BankQuestion]) -> bytes:
    return b"".join(orjson.dumps(q.to_json()) + b"\n" for q in questions)


def save_bank(bank: Bank, path: str) -> None:
    data = dump_bank(bank.questions)
    if path.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    with open(path, "wb") as f:
        f.write(data)


DEFAULT_BANKS = ("antonyms", "countries", "continents", "capitals", "languages", "plurals", "comparatives")


def one_sample_accuracy(bank: Bank, samples: int | None = None) -> float:
    """The accuracy of answering with one sample: per question, the fraction of its first
    ``samples`` (default all) samples that are right, averaged over questions. This is the
    expected accuracy of one draw; the first sample alone would be a noisier estimate of it."""
    k = samples or bank.min_samples
    per_question = [
        float(np.mean([a != NULL and bool(q.answer_correct[a]) for a in q.answers[:k].tolist()]))
        for q in bank.questions
    ]
    return float(np.mean(per_question)) if per_question else 0.0


def default_bank_names() -> tuple[str, ...]:
    return DEFAULT_BANKS


def default_bank(name: str) -> Bank:
    """An embedded bank of real SmolLM2-135M samples (see ``learn/stopping/data/README.md``)."""
    res = resources.files("orchestrace.learn.stopping") / "data" / f"{name}.jsonl.gz"
    if not res.is_file():
        raise OrchestraceError("OT611", f"no embedded bank named {name!r}; known: {', '.join(DEFAULT_BANKS)}")
    bank = parse_bank(gzip.decompress(res.read_bytes()), f"<embedded>/{name}.jsonl.gz", name)
    bank.meta["source"] = f"embedded:{name}"
    return bank


# ---------------------------------------------------------------- synthetic banks


@dataclass(frozen=True)
class SynthParams:
    """Generative model of a synthetic bank (exact Bayes-optimal stopping exists for it).

    Per question: the correct answer has probability ``p ~ Beta(a, b)``; the remaining mass
    ``1 - p`` is split over ``distractors`` wrong answers with proportions
    ``~ Dirichlet(alpha, ..., alpha)`` (small alpha: one dominant wrong answer, the "echo" failure;
    large alpha: scattered wrong answers). Each sample is null with probability ``null_rate``.
    The defaults are calibrated to the embedded antonym bank (see ``calibrate``).
    """

    a: float = 1.0
    b: float = 1.6
    distractors: int = 5
    alpha: float = 0.3
    null_rate: float = 0.0
    samples: int = 40


def synthetic_bank(
    n: int, params: SynthParams = SynthParams(), seed: int = 0, name: str = "synthetic"
) -> Bank:
    """Draw a bank of n questions from ``params``; same seed, same bank."""
    if n < 1:  # -n -5 wrote an empty bank and said "wrote -5 synthetic questions"
        raise OrchestraceError("OT610", f"a synthetic bank needs at least one question, got {n}")
    if seed < 0:  # numpy's "expected non-negative integer" (exit 3)
        raise OrchestraceError("OT610", f"the seed must be >= 0, got {seed}")
    rng = np.random.default_rng(seed)
    qs: list[BankQuestion] = []
    k = params.distractors
    for i in range(n):
        p = rng.beta(params.a, params.b)
        wrong = rng.dirichlet(np.full(k, params.alpha)) * (1 - p) if k else np.zeros(0)
        probs = np.concatenate([[p], wrong])
        probs /= probs.sum()
        draws = rng.choice(k + 1, size=params.samples, p=probs)
        null = rng.random(params.samples) < params.null_rate
        samples = [
            None if z else ("gold" if d == 0 else f"wrong{d}") for d, z in zip(draws, null, strict=True)
        ]
        qs.append(BankQuestion(f"syn-{i}", f"synthetic question {i}", "gold", samples))
    return Bank(name, qs, {"synthetic": asdict(params), "seed": seed})


def calibrate(bank: Bank, distractors: int = 5, alpha: float | None = None) -> SynthParams:
    """Fit ``SynthParams`` to a real bank: Beta(a, b) by moments of the per-question correct rate,
    alpha so that the expected share of the largest wrong answer matches, and the null rate."""
    rates, nulls, top_wrong = [], [], []
    for q in bank.questions:
        valid = q.answers[q.answers != NULL]
        nulls.append(1 - len(valid) / len(q.answers))
        if len(valid) == 0:
            continue
        ok = q.answer_correct[valid]
        rates.append(ok.mean())
        wrong = valid[~ok]
        if len(wrong):
            top_wrong.append(np.bincount(wrong).max() / len(wrong))
    if not rates:  # np.mean([]): numpy's warning and a, b = nan, printed and used as parameters
        raise _fail(
            "every sample of every question is null: no answer to calibrate a generator to",
            str(bank.meta.get("source", bank.name)),
        )
    m, v = float(np.mean(rates)), float(np.var(rates))
    v = min(max(v, 1e-4), m * (1 - m) * 0.99)
    s = m * (1 - m) / v - 1
    if alpha is None:
        target = float(np.mean(top_wrong)) if top_wrong else 0.5
        grid = np.geomspace(0.02, 20, 60)
        rng = np.random.default_rng(0)
        shares = [rng.dirichlet(np.full(distractors, g), size=2000).max(1).mean() for g in grid]
        alpha = float(grid[int(np.argmin(np.abs(np.array(shares) - target)))])
    return SynthParams(
        a=round(m * s, 3),
        b=round((1 - m) * s, 3),
        distractors=distractors,
        alpha=round(alpha, 3),
        null_rate=round(float(np.mean(nulls)), 3),
        samples=bank.min_samples,
    )
