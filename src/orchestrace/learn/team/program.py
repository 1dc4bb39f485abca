"""The ``team`` runtime program: k solvers answer a bank question, an aggregator reads their answers
and gives the team's answer. Success needs both: the aggregator sees nothing but the question and
the solvers' answers, and the solvers' answers only count through the aggregator.

Config: ``family`` (a question family of ``learn/stopping/families.py``: antonyms, countries,
...), ``question`` (its id), ``solvers`` (k), ``adapters`` (``shared``: one adapter for everyone,
``role``: one per role, ``agent``: one per agent; the name goes into each call's ``model`` field,
which is also what a vLLM LoRA server routes on), ``temperature``, ``aggregator_temperature``.

:func:`verify` is the R1 verifier: 1 when the team's answer, canonicalised as the family reads
answers, is the gold answer (or an accepted alias), else 0.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import OrchestraceError
from ...core.model import Trace
from ...runtime.backends.scripted import ScriptedBackend
from ...runtime.examples.common import Setup
from ...runtime.orchestrator import AgentSpec, BasePolicy, Message, Result, RunState, Task
from ..stopping.families import FAMILIES, Family, Question

ADAPTER_MODES = ("shared", "role", "agent")


class BadInput(OrchestraceError):
    """A bad option, file or program for team training: exit 1 (bad input), not 2 (usage)."""

    exit_code = 1


AGGREGATOR = "aggregator"
AGGREGATE_ASK = "Your teammates answered this question. Reply with the best answer, just the answer."


def solver_names(k: int) -> list[str]:
    return [f"solver_{i}" for i in range(k)]


def adapter_of(mode: str, agent: str, role: str) -> str:
    """The adapter an agent's calls use under an adapter mode."""
    if mode not in ADAPTER_MODES:
        raise BadInput("OT692", f"unknown adapter mode {mode!r}; known: {', '.join(ADAPTER_MODES)}")
    return {"shared": "team", "role": role, "agent": agent}[mode]


def adapters_for(mode: str, k: int) -> list[str]:
    """Every adapter the program uses with k solvers, in a fixed order."""
    names = [(a, "solver") for a in solver_names(k)] + [(AGGREGATOR, AGGREGATOR)]
    return list(dict.fromkeys(adapter_of(mode, a, r) for a, r in names))


def family(name: str) -> Family:
    if name not in FAMILIES:
        raise BadInput("OT693", f"unknown question family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


def question(fam: Family, qid: str) -> Question:
    for q in fam.questions:
        if q.id == qid:
            return q
    raise BadInput("OT693", f"no question {qid!r} in family {fam.name!r}")


def solver_shots(fam: Family) -> list[dict[str, str]]:
    return [
        m
        for ask, ans in fam.shots
        for m in ({"role": "user", "content": ask}, {"role": "assistant", "content": ans})
    ]


def aggregator_shots(fam: Family, k: int) -> list[dict[str, str]]:
    """Example turns in the form the orchestrator builds (the ask, then one "X says:" line per
    solver); in each, some teammates are wrong (another example's answer) and the gold one wins."""
    out: list[dict[str, str]] = []
    answers = [ans for _, ans in fam.shots]
    for j, (ask, ans) in enumerate(fam.shots):
        wrong = answers[(j + 1) % len(answers)]
        lines = [f"{s} says: {ans if (i + j) % 2 == 0 else wrong}" for i, s in enumerate(solver_names(k))]
        if k > 1 and all(line.endswith(wrong) for line in lines):
            lines[0] = f"solver_0 says: {ans}"
        out += [
            {"role": "user", "content": f"{ask}\n{AGGREGATE_ASK}\n" + "\n".join(lines)},
            {"role": "assistant", "content": ans},
        ]
    return out


class TeamPolicy(BasePolicy):
    """Round 0: every solver answers; their answers go to the aggregator as messages.
    Round 1: the aggregator answers; that is the team's answer. Then stop."""

    name = "team"

    def __init__(
        self, fam: Family, q: Question, k: int, mode: str, temperature: float, agg_temperature: float
    ) -> None:
        super().__init__("continue")
        self.fam, self.q, self.k, self.mode = fam, q, k, mode
        self.temperature, self.agg_temperature = temperature, agg_temperature

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if s.agents or s.round:
            return []
        solvers = [
            AgentSpec(
                name,
                "solver",
                temperature=self.temperature,
                max_tokens=self.fam.max_new_tokens,
                model=adapter_of(self.mode, name, "solver"),
                fewshot=solver_shots(self.fam),
            )
            for name in solver_names(self.k)
        ]
        agg = AgentSpec(
            AGGREGATOR,
            AGGREGATOR,
            temperature=self.agg_temperature,
            max_tokens=self.fam.max_new_tokens,
            model=adapter_of(self.mode, AGGREGATOR, AGGREGATOR),
            fewshot=aggregator_shots(self.fam, self.k),
        )
        return [*solvers, agg]

    def delegate(self, s: RunState) -> list[Task]:
        if s.round == 0:
            return [Task(name, self.q.question) for name in solver_names(self.k)]
        if s.round == 1:
            return [Task(AGGREGATOR, f"{self.q.question}\n{AGGREGATE_ASK}")]
        return []

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        if s.round != 0:
            return []
        return [Message(r.agent, AGGREGATOR, r.text) for r in results if r.text]

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        if s.round != 1:
            return None
        return next((r.text for r in results if r.agent == AGGREGATOR and r.text is not None), None)

    def stop(self, s: RunState) -> str | None:
        return super().stop(s) or ("done" if s.round >= 2 else None)


def build(config: dict[str, Any]) -> Setup:
    fam = family(str(config.get("family", "countries")))
    qid = config.get("question")
    q = question(fam, str(qid)) if qid is not None else fam.questions[0]
    k = int(config.get("solvers", 2))
    if k < 1:
        raise BadInput("OT693", f"the team program needs at least one solver, got {k}")
    mode = str(config.get("adapters", "role"))
    adapter_of(mode, AGGREGATOR, AGGREGATOR)
    gold = q.gold
    return Setup(
        policy=TeamPolicy(
            fam,
            q,
            k,
            mode,
            float(config.get("temperature", 0.7)),
            float(config.get("aggregator_temperature", 0.7)),
        ),
        task=q.question,
        topology="centralized",
        scripted=lambda seed: ScriptedBackend(fn=lambda req: gold, seed=seed),
    )


def answer_correct(fam: Family, q: Question, text: str | None) -> bool:
    return text is not None and fam.canonical(text, q) == q.gold


def trace_question(trace: Trace) -> tuple[Family, Question]:
    rt = (trace.metadata or {}).get("runtime") or {}
    cfg = rt.get("config") if isinstance(rt, dict) else None
    if not isinstance(cfg, dict) or "question" not in cfg:
        raise BadInput(
            "OT694",
            f"trace {trace.trace_id!r} was not recorded by the team program (no metadata.runtime.config.question)",
        )
    fam = family(str(cfg.get("family", "countries")))
    return fam, question(fam, str(cfg["question"]))


def verify(trace: Trace) -> float:
    """R1 of a team run: 1.0 when the team's final answer is right, else 0.0."""
    fam, q = trace_question(trace)
    final = ((trace.metadata or {}).get("outcome") or {}).get("final")
    return 1.0 if answer_correct(fam, q, final) else 0.0
