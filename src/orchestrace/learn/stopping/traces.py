"""Vote traces <-> stop training data: the answers in order, the decisions taken, the gold.

A run of the ``vote`` program (``orchestrace.runtime.programs.vote``) is one StopVote episode:
its workers' final ``return`` events, in trace order, are the samples; its ``should_stop``
decision events are the decisions a trace policy took; the gold answer and the task family are in
the run's config (``metadata.runtime.config``). A sample bank is one view over such traces:
:func:`bank_to_traces` writes one trace per question (every sample a worker answer) and
:func:`bank_from_traces` reads them back, so ``--bank`` and ``--traces`` give the same data.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.errors import BadInput, OrchestraceError
from ...core.model import Event, Trace
from ...core.paths import glob_paths, make_dirs
from ...runtime.backends.base import LogprobSummary, logprob_attrs, logprob_from_attrs
from .banks import Bank, BankQuestion

VOTE_PROGRAM = "vote"


@dataclass(frozen=True)
class StopDecisionEvent:
    """One ``should_stop`` decision as recorded: where, by which policy, on how many answers."""

    event: str
    index: int  # position of the event in the trace
    act: bool
    policy: str
    prob: float
    features_hash: str
    samples: int


@dataclass(frozen=True)
class VoteEpisode:
    path: str
    trace_id: str
    family: str | None
    question_id: str
    question: str
    gold: str | None
    answers: list[str | None]  # canonical answers of the finished workers, in trace order
    answer_index: list[int]  # trace position of each answer's return event
    costs: list[float] | None
    correct: list[bool] | None  # per-answer verifier marks, when the trace has them instead of a gold
    logprob: list[LogprobSummary | None] | None  # per-answer token log-probabilities, when recorded
    decisions: list[StopDecisionEvent]
    budget: int | None
    bank: str | None  # the bank the trace was written from (``bank_to_traces``), if any
    bank_index: int | None  # and the question's position in it


#: config keys a vote run's reading takes, and the types a vote program writes there
_CONFIG_TYPES: dict[str, tuple[type, ...]] = {
    "family": (str,),
    "question_id": (str, int),
    "question": (str,),
    "gold": (str,),
    "bank": (str,),
}


def _runtime(tr: Trace) -> dict[str, Any]:
    rt = (tr.metadata or {}).get("runtime")
    return rt if isinstance(rt, dict) else {}  # not an object: no program, so not a vote run


def _config(tr: Trace, path: str) -> dict[str, Any]:
    """The run's config, each key read checked: a list where a name belongs was an internal error
    (unhashable, unorderable) and a gold of 5 a bank no bank file may hold."""
    cfg = _runtime(tr).get("config")
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        raise _bad(
            f"metadata.runtime.config must be an object, got {type(cfg).__name__}",
            path,
            "/metadata/runtime/config",
        )
    for key, kinds in _CONFIG_TYPES.items():
        v = cfg.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, kinds)):
            need = " or ".join("a string" if k is str else "an integer" for k in kinds)
            raise _bad(f"{key} must be {need}, got {v!r:.60}", path, f"/metadata/runtime/config/{key}")
    return cfg


def _bad(message: str, path: str, pointer: str) -> BadInput:
    return BadInput("OT614", f"not a readable vote run: {message}", path=path, pointer=pointer)


def _canonicaliser(family: str | None, qid: str | None) -> Callable[[str], str | None]:
    """How a worker's text becomes a vote: the family's rule for that question (aliases map to the
    gold), or the vote program's own (first line, lower case) when the family is unknown."""
    if family is None:
        from ...runtime.programs.vote import first_line

        return first_line
    from .families import Question
    from .families import family as get_family

    fam = get_family(family)
    q = next((q for q in fam.questions if q.id == qid), Question("", "", "", ()))
    return lambda text: fam.canonical(text, q)


def _answer(e: Event, canon: Callable[[str], str | None], path: str, pointer: str) -> str | None:
    """A worker's answer: recorded exactly (``attrs.answer``) or canonicalised from its text; a
    failed or dropped worker is a null answer."""
    attrs = e.attrs or {}
    if "answer" in attrs:
        if attrs["answer"] is not None and not isinstance(attrs["answer"], str):
            raise _bad(f"an answer is a string or null, got {attrs['answer']!r:.60}", path, pointer)
        return attrs["answer"]
    if e.status not in (None, "ok") or attrs.get("dropped"):
        return None
    return canon(e.content or "")


def episode_from_trace(tr: Trace, path: str = "<trace>") -> VoteEpisode:
    """The StopVote episode of one vote trace; a clear error when the trace is not one."""
    program = _runtime(tr).get("program")
    if program != VOTE_PROGRAM:
        raise BadInput(
            "OT614",
            f"trace {tr.trace_id!r} is not a run of the vote program (metadata.runtime.program is {program!r}); "
            "a stop trainer needs the workers' answers of a vote run",
            path=path,
            pointer="/metadata/runtime/program",
        )
    cfg = _config(tr, path)
    family, qid = cfg.get("family"), cfg.get("question_id")
    try:
        canon = _canonicaliser(family, qid)
    except OrchestraceError as e:  # an unknown family named no file
        e.path, e.pointer = path, "/metadata/runtime/config/family"
        raise
    last: dict[str, int] = {}
    for i, e in enumerate(tr.events):
        if e.type == "return" and e.role == "worker":
            last[e.agent] = i
    order = sorted(last.values())
    answers = [_answer(tr.events[i], canon, path, f"/events/{i}/attrs/answer") for i in order]
    costs = [_event_number(tr, i, "sample_cost", 1.0, math.inf, path) for i in order]
    marks = [(tr.events[i].attrs or {}).get("correct") for i in order]
    for i, m in zip(order, marks, strict=True):
        if m is not None and not isinstance(m, bool):  # bool("no") was a right answer
            raise _bad(
                f"correct must be true, false or null, got {m!r:.60}", path, f"/events/{i}/attrs/correct"
            )
    decisions = []
    for i, e in enumerate(tr.events):
        a = e.attrs or {}
        if e.type == "orchestrator_decision" and a.get("decision") == "should_stop":
            samples = a.get("samples", 0)
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
                raise _bad(
                    f"samples must be an integer >= 0, got {samples!r:.60}",
                    path,
                    f"/events/{i}/attrs/samples",
                )
            decisions.append(
                StopDecisionEvent(
                    e.id, i, a.get("value") == "stop", str(a.get("policy")),
                    _event_number(tr, i, "prob", 0.0, 1.0, path), str(a.get("features_hash")), samples,
                )
            )  # fmt: skip
    logprob = [logprob_from_attrs(tr.events[i].attrs or {}) for i in order]
    has_cost = any("sample_cost" in (tr.events[i].attrs or {}) for i in order)
    budget = cfg.get("budget")
    return VoteEpisode(
        path=path,
        trace_id=tr.trace_id,
        family=family,
        question_id=str(qid if qid is not None else tr.task_id),
        question=str(cfg.get("question") or tr.task_id),  # the program's task is its question
        gold=cfg.get("gold"),
        answers=answers,
        answer_index=order,
        costs=costs if has_cost else None,
        correct=[bool(m) for m in marks] if marks and all(m is not None for m in marks) else None,
        logprob=logprob if any(x is not None for x in logprob) else None,
        decisions=decisions,
        budget=budget if isinstance(budget, int) else None,
        bank=cfg.get("bank"),
        bank_index=cfg.get("bank_index") if isinstance(cfg.get("bank_index"), int) else None,
    )


def _event_number(tr: Trace, i: int, key: str, default: float, high: float, path: str) -> float:
    """``attrs[key]`` of event ``i`` as a finite number in [0, high] (``float("abc")`` was an
    internal error, a cost of -5 or a probability of 2 read on silently)."""
    v = (tr.events[i].attrs or {}).get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not (0 <= v <= high and math.isfinite(v)):
        need = "a finite number >= 0" if math.isinf(high) else f"a number in [0, {high:g}]"
        raise _bad(f"{key} must be {need}, got {v!r:.60}", path, f"/events/{i}/attrs/{key}")
    return float(v)


def trace_paths(pattern: str | Sequence[str]) -> list[str]:
    """Trace files matching a glob (or several); an error when none match."""
    pats = [pattern] if isinstance(pattern, str) else list(pattern)
    paths = glob_paths(pats)
    if not paths:
        raise OrchestraceError("OT615", f"no trace files match {', '.join(pats)!r}")
    return paths


def load_episodes(pattern: str | Sequence[str]) -> list[VoteEpisode]:
    from ...core.io import load_one

    return [episode_from_trace(load_one(p), p) for p in trace_paths(pattern)]


def bank_from_episodes(episodes: Sequence[VoteEpisode], name: str) -> Bank:
    """A bank with one question per episode (episodes of one question id must not repeat)."""
    seen: dict[str, str] = {}
    questions = []
    for ep in episodes:
        if ep.question_id in seen:
            raise BadInput(
                "OT616",
                f"question {ep.question_id!r} appears in two traces ({seen[ep.question_id]}); "
                "a bank holds one sample sequence per question (runs that draw a question again, as "
                "loop stop's do, are read as they happened with train stop --logged)",
                path=ep.path,
            )
        seen[ep.question_id] = ep.path
        if not ep.answers:
            raise BadInput("OT614", "the trace has no worker answer to learn from", path=ep.path)
        questions.append(
            BankQuestion(
                ep.question_id, ep.question, ep.gold, list(ep.answers), ep.correct, ep.costs, ep.logprob
            )
        )
    families = sorted({ep.family for ep in episodes if ep.family})
    return Bank(name, questions, {"family": families[0]} if len(families) == 1 else {})


def bank_from_traces(pattern: str | Sequence[str], name: str | None = None) -> Bank:
    """``train stop --traces``: the bank the vote traces under ``pattern`` hold."""
    eps = load_episodes(pattern)
    if all(ep.bank_index is not None for ep in eps):  # written from a bank: its question order
        eps.sort(key=lambda ep: (ep.bank or "", ep.bank_index))
    names = sorted({ep.bank or ep.family or "traces" for ep in eps})
    return bank_from_episodes(eps, name or "+".join(names))


def bank_to_traces(bank: Bank, out_dir: str) -> list[str]:
    """One vote trace per question: its samples as worker answers (``attrs.answer`` keeps the
    canonical answer exactly), the gold and family in the config; returns the paths."""
    from .families import FAMILIES

    family = bank.meta.get("family") or bank.name
    fam = family if family in FAMILIES else None
    return [record_question(q, out_dir, bank.name, i, fam) for i, q in enumerate(bank.questions)]


def record_question(
    q: BankQuestion,
    out_dir: str,
    bank: str,
    index: int,
    family: str | None,
    texts: Sequence[str] | None = None,
    sampling: dict[str, Any] | None = None,
    decisions: Sequence[tuple[bool, float]] | None = None,
) -> str:
    """Write one question's samples as a vote run (``OUT_DIR/ID.events.jsonl``): each sample a worker
    whose return carries the raw text (``texts``, else the canonical answer) and ``attrs.answer``,
    the canonical answer, exactly; ``sampling`` (prompt, seed, model) goes into the config.
    ``decisions`` (stop or not, the probability of that action), one after each of the first
    answers: the ``should_stop`` decisions a sampling stop policy records (the run ends at a stop),
    for replaying a bank as ``loop stop``'s runs."""
    from ...runtime.recorder import Recorder

    make_dirs(out_dir)
    cfg = {"question": q.question, "question_id": q.id, "gold": q.gold, "bank": bank,
           "bank_index": index, "budget": len(q.samples), **(sampling or {})}  # fmt: skip
    if family is not None:
        cfg["family"] = family
    path = os.path.join(out_dir, f"{_safe(q.id)}.events.jsonl")
    meta = {"runtime": {"program": VOTE_PROGRAM, "config": cfg, "source": f"bank:{bank}"}}
    with Recorder(path, task_id=q.question, trace_id=f"bank-{q.id}", topology="centralized",
                  metadata=meta, clock="logical") as rec:  # fmt: skip
        for k, s in enumerate(q.samples):
            if decisions is not None and k > 0 and decisions[k - 1][0]:
                break  # the policy stopped after k answers
            name = f"w{k}"
            rec.spawn(name, role="worker", parent=rec.root_agent)
            attrs: dict[str, Any] = {"answer": s}
            if q.cost is not None:
                attrs["sample_cost"] = float(q.cost[k])
            if q.correct is not None:
                attrs["correct"] = bool(q.correct[k])
            if q.logprob is not None and q.logprob[k] is not None:
                attrs.update(logprob_attrs(q.logprob[k]))
            last = rec.ret(s if texts is None else texts[k], frm=name, role="worker", attrs=attrs)
            rec.despawn(name, parent=rec.root_agent, after=[last])
            if decisions is not None and k < len(decisions):
                act, prob = decisions[k]
                rec.decision("should_stop", "stop" if act else "continue",
                             attrs={"policy": "replay", "prob": prob, "features_hash": "", "samples": k + 1})  # fmt: skip
        rec.stop("budget")
    return path


def check_traces(paths: Sequence[str]) -> None:
    """Every trace file passes the validator (an error names the first file and its finding)."""
    from ...core.validate import validate_path

    for p in paths:
        res = validate_path(p)
        if not res.valid:
            f = next((f for f in res.findings if f.severity == "error"), None)
            raise BadInput("OT614", f"recorded trace is invalid: {f.code + ' ' + f.message if f else 'truncated'}",
                           path=p)  # fmt: skip


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
