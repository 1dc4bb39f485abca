"""Self-consistency by vote, in parallel waves: ``width`` workers sample the question at once, each
answering once, until ``budget`` answers; the stop decision is asked after every finished worker,
so a stop policy can end the run early (cancelling the rest of a wave). The final answer is the
majority of the answers so far (first line, lower case, punctuation stripped; ties: seen first),
with ``answer: confidence`` the leader of the votes weighted by exp(each answer's mean token
log-probability) (a backend that gives none: the majority), or a learned aggregator's
(``--policy aggregate=PATH``), asked after every wave.

Config: ``question`` (str; default: the antonym of "hot"), ``fewshot`` (list of [question, answer]
example turns; default: the antonym examples), ``budget``
(default 8), ``width`` (default 1), ``max_tokens`` (8), ``temperature`` (0.7), ``system``. Other
keys (e.g. ``family``, ``question_id``, ``gold``) are kept in the trace's metadata for whoever
scores the run.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ...core.errors import OrchestraceError
from ...core.stats import majority
from ..backends.scripted import ScriptedBackend
from ..orchestrator import AgentSpec, BasePolicy, Result, RunState, Task
from . import Setup
from .antonyms import ANTONYM_FEWSHOT, ANTONYM_SHOTS
from .config import positive_int

_ANTONYM_SHOTS = [[ANTONYM_FEWSHOT.format(w=q), a] for q, a in ANTONYM_SHOTS]

_PUNCT = re.compile(r"[^\w\s'-]")


def first_line(text: str | None) -> str | None:
    """The answer as voted on: first line, lower case, punctuation stripped (None if empty)."""
    if not text or not text.strip():
        return None
    line = _PUNCT.sub(" ", text.strip().splitlines()[0].lower())
    return " ".join(line.split()) or None


class VotePolicy(BasePolicy):
    name = "vote"

    def __init__(self, question: str, fewshot: list[dict[str, str]], budget: int, width: int, *,
                 system: str, max_tokens: int, temperature: float, weighted: bool = False) -> None:  # fmt: skip
        super().__init__("continue")
        self.weighted = weighted
        self.question, self.fewshot = question, fewshot
        self.budget, self.width = budget, width
        self.system, self.max_tokens, self.temperature = system, max_tokens, temperature
        self.spawned = 0

    def spawn(self, s: RunState) -> list[AgentSpec]:
        k = min(self.width, self.budget - self.spawned)
        specs = [
            AgentSpec(f"w{self.spawned + i}", "worker", self.system, self.temperature, self.max_tokens,
                      fewshot=self.fewshot)
            for i in range(k)
        ]  # fmt: skip
        self.spawned += k
        return specs

    def delegate(self, s: RunState) -> list[Task]:
        answered = {r.agent for r in s.results}
        return [Task(name, self.question) for name in s.agents if name not in answered]

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        votes = [a for a in (first_line(r.text) for r in s.results) if a]
        if not votes:
            return None
        if self.weighted:  # as learn.stopping.rules.confidence_answer (ties: seen first)
            w: dict[str, float] = {}
            for r in s.results:
                if (a := first_line(r.text)) is not None:
                    w[a] = w.get(a, 0.0) + (0.0 if r.logprob_mean is None else math.exp(r.logprob_mean))
            if max(w.values()) > 0:
                return max(w, key=lambda a: w[a])
        return majority(votes)

    def stop(self, s: RunState) -> str | None:
        return "budget" if len(s.results) >= self.budget else None


def _answer(config: dict[str, Any]) -> str:
    v = config.get("answer", "majority")
    if v not in ("majority", "confidence"):
        raise OrchestraceError("OT604", f"vote: config 'answer' must be majority or confidence, got {v!r}")
    return v


def build(config: dict[str, Any]) -> Setup:
    question = config.get("question", ANTONYM_FEWSHOT.format(w="hot"))
    if not isinstance(question, str) or not question.strip():
        raise OrchestraceError("OT604", "vote: config 'question' must be a non-empty string")
    shots = config.get("fewshot", _ANTONYM_SHOTS)
    if not isinstance(shots, list) or not all(
        isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in shots
    ):
        raise OrchestraceError("OT604", "vote: config 'fewshot' must be a list of [question, answer] pairs")
    fewshot = [
        m for q, a in shots for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})
    ]
    policy = VotePolicy(
        question,
        fewshot,
        positive_int(config, "budget", 8, "vote"),
        positive_int(config, "width", 1, "vote"),
        system=str(config.get("system", "You are a careful assistant. Answer briefly.")),
        max_tokens=positive_int(config, "max_tokens", 8, "vote"),
        temperature=float(config.get("temperature", 0.7)),
        weighted=_answer(config) == "confidence",
    )
    return Setup(
        policy=policy,
        task=question,
        topology="centralized",
        learnable=("stop", "aggregate"),
        scripted=lambda seed: ScriptedBackend(
            choices=list(config.get("scripted_choices") or ["cold", "cold", "warm", "cool"]), seed=seed
        ),
    )
