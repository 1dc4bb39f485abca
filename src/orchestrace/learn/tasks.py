"""Task files: questions with gold answers, read from JSONL or Parquet, and the verifiers that score
an answer. The one loader for every task a training command runs: a user's file (``--tasks
PATH``) and the shipped word families (``--tasks continents`` names ``task_files/continents.jsonl``)
go through the same code.

A row: ``id`` (string or integer, unique), ``question`` (or ``prompt``), ``answer`` (a string or a
list of accepted answers, the first is the gold spelling), optional ``split`` (``train``,
``heldout`` (also ``test``, ``validation``), or ``shot``: a few-shot example shown before every
question, never asked) and ``metadata`` (an object, kept for hooks). Without any ``split`` the
train / held-out split is one fixed shuffle (seed 0), so every seed of an experiment is evaluated
on the same held-out questions.

Verifiers (``--verifier``): ``exact`` (normalised exact match: first line, lower case, punctuation
and a leading "the" dropped), ``phrase`` (``exact`` on at most four words, "in" / "it is in"
dropped too: the place families), ``word`` (the first word), ``contains`` (an accepted answer
occurs as whole words), ``numeric`` or ``numeric:TOL`` (the first number is within TOL of an
accepted one, default 1e-6), ``choice`` (the first standalone letter A-J is the answer letter), or
``module:function`` called as ``function(answer: str, task: TaskItem) -> float | bool`` (1 =
right; loaded like a reward spec's ``[hooks]``, ``core.plugins.resolve``).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..core.errors import BadInput, LoadError, OrchestraceError
from ..core.plugins import hook_number, resolve
from ..core.read import parse_json

#: a bad task file or verifier: bad input (exit 1), the one of core
TaskFileError = BadInput

TASK_FILES = "task_files"
INDEX = "index.json"
TRAIN_SPLITS = frozenset({"train"})
HELDOUT_SPLITS = frozenset({"heldout", "held-out", "test", "validation", "eval"})
SHOT_SPLIT = "shot"
DEFAULT_VERIFIER = "exact"
DEFAULT_MAX_TOKENS = 16


@dataclass(frozen=True)
class TaskItem:
    """One question of a task file; ``line`` is its 1-based line (JSONL) or row (Parquet)."""

    id: str
    question: str
    answers: tuple[str, ...]
    split: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    line: int = 0

    @property
    def gold(self) -> str:
        return self.answers[0]


# ------------------------------------------------------------------ verifiers

_PUNCT = re.compile(r"[^\w\s'-]")
_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_LETTER = re.compile(r"(?<![A-Za-z])([A-Ja-j])(?![A-Za-z])")


def clean(text: str) -> str:
    """The first non-empty line, lower case, punctuation dropped, spaces collapsed."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    line = _PUNCT.sub(" ", line.lower()).replace("_", " ")
    return _SPACE.sub(" ", line).strip(" '-")


def _norm(text: str) -> str:
    s = clean(text)
    return s[4:] if s.startswith("the ") else s


def _accepted(answers: tuple[str, ...]) -> set[str]:
    return {clean(a) for a in answers}


def canon_exact(text: str, answers: tuple[str, ...]) -> str | None:
    """The normalised first line; an accepted answer (normalised alike) counts as the gold one."""
    s = _norm(text)
    if not s:
        return None
    return answers[0] if s in {_norm(a) for a in answers} else s


def canon_phrase(text: str, answers: tuple[str, ...]) -> str | None:
    """At most four words without a leading "the", "it is in" or "in" (the families' reading)."""
    s = clean(text)
    for prefix in ("the ", "it is in ", "in "):
        if s.startswith(prefix):
            s = s[len(prefix) :]
    if not s:
        return None
    s = " ".join(s.split()[:4])
    return answers[0] if s in _accepted(answers) else s


def canon_word(text: str, answers: tuple[str, ...]) -> str | None:
    """The first word; an accepted answer counts as the gold one."""
    words = clean(text).split()
    if not words:
        return None
    return answers[0] if words[0] in _accepted(answers) else words[0]


def canon_contains(text: str, answers: tuple[str, ...]) -> str | None:
    s = " " + _SPACE.sub(" ", _PUNCT.sub(" ", text.lower())).strip() + " "
    for a in answers:
        if f" {clean(a)} " in s:
            return answers[0]
    return clean(text) or None


def _number(text: str) -> float | None:
    m = _NUMBER.search(text)
    if m is None:
        return None
    try:
        return float(m.group().replace(",", ""))
    except ValueError:
        return None


def numeric(tolerance: float) -> Callable[[str, tuple[str, ...]], str | None]:
    def canon(text: str, answers: tuple[str, ...]) -> str | None:
        x = _number(text)
        if x is None:
            return None
        for a in answers:
            y = _number(a)
            if y is not None and math.isfinite(x) and abs(x - y) <= tolerance + 1e-9 * max(1.0, abs(y)):
                return answers[0]
        return f"{x:g}"

    return canon


def canon_choice(text: str, answers: tuple[str, ...]) -> str | None:
    m = _LETTER.search(text.strip())
    if m is None:
        return None
    letter = m.group(1).upper()
    return answers[0] if letter in {a.strip().upper() for a in answers} else letter


CANONICAL: dict[str, Callable[[str, tuple[str, ...]], str | None]] = {
    "exact": canon_exact,
    "phrase": canon_phrase,
    "word": canon_word,
    "contains": canon_contains,
    "choice": canon_choice,
}


@dataclass(frozen=True)
class Verifier:
    """Reads an answer: ``canonical`` maps it to the gold spelling when right (votes for the same
    answer count together); ``score`` is 1.0 right, 0.0 wrong (a hook may give a fraction)."""

    name: str
    canonical: Callable[[str, tuple[str, ...]], str | None]
    hook: Callable[..., Any] | None = None

    def score(self, text: str | None, item: TaskItem) -> float:
        if text is None:
            return 0.0
        if self.hook is not None:
            return hook_number(self.hook(text, item), self.hook, item.id, "OT671")
        return 1.0 if self.canonical(text, item.answers) == item.gold else 0.0

    def correct(self, text: str | None, item: TaskItem) -> bool:
        return self.score(text, item) >= 1.0


def verifier(spec: str) -> Verifier:
    """A verifier by name (see the module doc)."""
    name, _, arg = spec.partition(":")
    if name in CANONICAL and not arg:
        return Verifier(spec, CANONICAL[name])
    if name == "numeric":
        try:
            tol = float(arg) if arg else 1e-6
        except ValueError:
            tol = -1.0
        if not (tol >= 0 and math.isfinite(tol)):
            raise TaskFileError("OT671", f"numeric tolerance must be a number >= 0, got {arg!r}")
        return Verifier(spec, numeric(tol))
    if name in CANONICAL:
        raise TaskFileError("OT671", f"verifier {name!r} takes no argument, got {spec!r}")
    if arg:
        try:
            hook = resolve(spec, what="task verifier", code="OT671")
        except OrchestraceError as e:
            raise TaskFileError(e.code, e.message) from None
        return Verifier(spec, canon_exact, hook)
    known = ", ".join([*CANONICAL, "numeric[:TOL]", "module:function"])
    raise TaskFileError("OT671", f"unknown verifier {spec!r}; known: {known}")


# ------------------------------------------------------------------ task sets


@dataclass(frozen=True)
class TaskSet:
    """The questions of one task file, its few-shot examples and how to score an answer."""

    name: str
    source: str  # the file read
    items: tuple[TaskItem, ...]
    shots: tuple[TaskItem, ...]
    verifier: Verifier
    max_new_tokens: int

    def item(self, qid: str) -> TaskItem:
        for q in self.items:
            if q.id == qid:
                return q
        raise TaskFileError("OT672", f"no question {qid!r} in task set {self.name!r}", path=self.source)

    def messages(self, item: TaskItem) -> list[dict[str, str]]:
        """The few-shot example turns, then the question."""
        msgs: list[dict[str, str]] = []
        for s in self.shots:
            msgs += [{"role": "user", "content": s.question}, {"role": "assistant", "content": s.gold}]
        msgs.append({"role": "user", "content": item.question})
        return msgs

    def split(self, train_pool: int, heldout: int) -> tuple[list[str], list[str]]:
        """(training, held-out) ids. A file that gives splits: its first ``train_pool`` training
        and first ``heldout`` held-out rows. Otherwise one fixed shuffle (seed 0, whatever the run's
        seed), the first ``train_pool`` for training and the next ``heldout`` held out."""
        if any(q.split is not None for q in self.items):
            train = [q.id for q in self.items if q.split in TRAIN_SPLITS]
            held = [q.id for q in self.items if q.split in HELDOUT_SPLITS]
            if not train or not held:
                raise TaskFileError(
                    "OT673",
                    f"the file gives splits but has {len(train)} training and {len(held)} held-out "
                    "questions; it needs both (or no split at all)",
                    path=self.source,
                )
            return train[:train_pool], held[:heldout]
        n = len(self.items)
        if train_pool + heldout > n:
            raise TaskFileError(
                "OT673",
                f"task set {self.name!r} has {n} questions: train_pool + heldout = {train_pool + heldout}",
                path=self.source,
            )
        ids = [q.id for q in self.items]
        random.Random(0).shuffle(ids)
        return ids[:train_pool], ids[train_pool : train_pool + heldout]


def shipped_names() -> list[str]:
    return list(_index())


@cache
def _index() -> dict[str, dict[str, Any]]:
    res = resources.files(__package__) / TASK_FILES / INDEX
    return json.loads(res.read_text(encoding="utf-8"))


def _shipped_path(name: str) -> str:
    return str(resources.files(__package__) / TASK_FILES / f"{name}.jsonl")


def resolve_ref(ref: str) -> str:
    """A shipped name stays a name; a path becomes absolute (what a trace's config records)."""
    if ref in _index() and not os.path.isfile(ref):
        return ref
    if not os.path.isfile(ref):
        raise TaskFileError(
            "OT670",
            f"no task file {ref!r} and no shipped task set of that name; shipped: {', '.join(shipped_names())}",
        )
    return os.path.abspath(ref)


def load_tasks(ref: str, verifier_spec: str | None = None, max_new_tokens: int | None = None) -> TaskSet:
    """A task set by shipped name or file path (JSONL, JSONL.gz or Parquet); ``verifier_spec`` and
    ``max_new_tokens`` override the shipped set's own (files default to ``exact`` and 16)."""
    ref = resolve_ref(ref)
    stat = os.stat(_shipped_path(ref) if ref in _index() else ref)
    return _load(ref, verifier_spec, max_new_tokens, stat.st_mtime_ns, stat.st_size)


@cache
def _load(
    ref: str, verifier_spec: str | None, max_new_tokens: int | None, _mtime: int, _size: int
) -> TaskSet:
    shipped = _index().get(ref) if not os.path.isabs(ref) else None
    path = _shipped_path(ref) if shipped is not None else ref
    rows = read_rows(path)
    items, shots = parse_rows(rows, path)
    defaults = shipped or {}
    spec = verifier_spec or defaults.get("verifier", DEFAULT_VERIFIER)
    return TaskSet(
        name=ref if shipped is not None else Path(ref).name,
        source=path,
        items=items,
        shots=shots,
        verifier=verifier(spec),
        max_new_tokens=max_new_tokens or int(defaults.get("max_new_tokens", DEFAULT_MAX_TOKENS)),
    )


def read_rows(path: str) -> list[tuple[int, Any]]:
    """(line or row number, decoded row) of a JSONL (optionally gzip) or Parquet file."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as e:  # pyarrow raises several types for a file that is not Parquet
            raise TaskFileError("OT670", f"unreadable Parquet file: {e}", path=path) from None
        return list(enumerate(table.to_pylist(), 1))
    opener = gzip.open if path.endswith(".gz") else open
    out: list[tuple[int, Any]] = []
    try:
        with opener(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:  # with the limits every reader has (a line nested 5,000 deep: RecursionError)
                    out.append((n, parse_json(line, path=path, line=n)))
                except LoadError as e:
                    raise TaskFileError("OT670", e.message, path=path, line=n) from None
    except (OSError, EOFError, zlib.error) as e:  # a damaged .gz: EOFError, zlib.error (exit 3)
        raise TaskFileError("OT670", f"unreadable task file: {e}", path=path) from None
    return out


def _text(value: Any) -> str | None:
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def parse_rows(rows: list[tuple[int, Any]], path: str) -> tuple[tuple[TaskItem, ...], tuple[TaskItem, ...]]:
    """Rows -> (questions, few-shot examples); the first bad row is an error naming its line."""
    items: list[TaskItem] = []
    shots: list[TaskItem] = []
    seen: dict[str, int] = {}

    def bad(line: int, message: str, pointer: str | None = None) -> TaskFileError:
        return TaskFileError("OT670", message, path=path, line=line, pointer=pointer)

    for line, row in rows:
        if not isinstance(row, dict):
            raise bad(line, f"a task row must be an object, got {type(row).__name__}")
        qid = row.get("id")
        if qid is None or isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid):
            raise bad(line, "missing or empty 'id' (a string or an integer)", "/id")
        qid = str(qid)
        key = "question" if "question" in row else "prompt"
        question = row.get(key)
        if not isinstance(question, str) or not question.strip():
            raise bad(line, "missing 'question' (or 'prompt'): a non-empty string", f"/{key}")
        raw = row.get("answer")
        answers = [raw] if not isinstance(raw, list) else raw
        texts = [_text(a) for a in answers]
        if not texts or any(t is None for t in texts):
            raise bad(line, "missing 'answer': a string or a non-empty list of strings", "/answer")
        split = row.get("split")
        if split is not None and (
            not isinstance(split, str) or split not in TRAIN_SPLITS | HELDOUT_SPLITS | {SHOT_SPLIT}
        ):
            known = ", ".join(sorted(TRAIN_SPLITS | HELDOUT_SPLITS | {SHOT_SPLIT}))
            raise bad(line, f"unknown split {split!r}; known: {known}", "/split")
        metadata = row.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise bad(line, "'metadata' must be an object", "/metadata")
        if qid in seen:
            raise bad(line, f"duplicate id {qid!r} (first on line {seen[qid]})", "/id")
        seen[qid] = line
        item = TaskItem(qid, question, tuple(t for t in texts if t is not None), split, metadata, line)
        (shots if split == SHOT_SPLIT else items).append(item)
    if not items:
        raise TaskFileError("OT670", "the task file has no questions", path=path)
    return tuple(items), tuple(shots)
