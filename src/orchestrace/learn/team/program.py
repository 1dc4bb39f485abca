"""The ``team`` runtime program: k solvers answer a bank question, an aggregator reads their answers
and gives the team's answer. Success needs both: the aggregator sees nothing but the question and
the solvers' answers, and the solvers' answers only count through the aggregator.

Config: ``family`` (a task set: a shipped name such as ``continents`` or a task file's path,
read by ``learn/tasks.py``), ``verifier`` (overrides the task set's own), ``question`` (its id), ``solvers`` (k), ``adapters`` (``shared``: one adapter for everyone,
``role``: one per role, ``agent``: one per agent; the name goes into each call's ``model`` field,
which is also what a vLLM LoRA server routes on), ``temperature``, ``aggregator_temperature``.

:func:`verify` is the R1 verifier: 1 when the team's answer, scored by the task set's verifier, is
right (a ``module:function`` verifier may give a fraction), else 0.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import BadInput, OrchestraceError  # BadInput: the other team modules import it from here
from ...core.model import Trace
from ...runtime.backends.scripted import ScriptedBackend
from ...runtime.orchestrator import AgentSpec, BasePolicy, Message, Result, RunState, Task
from ...runtime.programs import Setup
from ..tasks import TaskItem, TaskSet, load_tasks

ADAPTER_MODES = ("shared", "role", "agent")


AGGREGATOR = "aggregator"
AGGREGATE_ASK = "Your teammates answered this question. Reply with the best answer, just the answer."
PROPOSER, REVISER = "proposer", "reviser"
REVISE_ASK = (
    "A teammate proposed an answer. Keep it if it is right, correct it if it is wrong; "
    "reply with just the answer."
)
#: ``aggregate``: k solvers answer, the aggregator reads their answers and answers for the team;
#: ``revise``: a proposer answers, a reviser reads the proposal and keeps or changes it
TOPOLOGIES = ("aggregate", "revise")


def solver_names(k: int) -> list[str]:
    return [f"solver_{i}" for i in range(k)]


def team_agents(topology: str, k: int) -> tuple[list[tuple[str, str]], tuple[str, str]]:
    """((name, role) of the agents answering first, (name, role) of the one answering last)."""
    if topology == "aggregate":
        return [(a, "solver") for a in solver_names(k)], (AGGREGATOR, AGGREGATOR)
    if topology == "revise":
        return [(PROPOSER, PROPOSER)], (REVISER, REVISER)
    raise BadInput("OT693", f"unknown team topology {topology!r}; known: {', '.join(TOPOLOGIES)}")


def adapter_of(mode: str, agent: str, role: str) -> str:
    """The adapter an agent's calls use under an adapter mode."""
    if mode not in ADAPTER_MODES:
        raise BadInput("OT692", f"unknown adapter mode {mode!r}; known: {', '.join(ADAPTER_MODES)}")
    return {"shared": "team", "role": role, "agent": agent}[mode]


def adapters_for(mode: str, k: int, topology: str = "aggregate") -> list[str]:
    """Every adapter the program uses with k solvers, in a fixed order."""
    first, last = team_agents(topology, k)
    return list(dict.fromkeys(adapter_of(mode, a, r) for a, r in [*first, last]))


def family(ref: str, verifier: str | None = None) -> TaskSet:
    """The task set a run asks (a shipped name or a task file)."""
    return load_tasks(ref, verifier)


def question(fam: TaskSet, qid: str) -> TaskItem:
    return fam.item(qid)


def solver_shots(fam: TaskSet) -> list[dict[str, str]]:
    return [
        m
        for s in fam.shots
        for m in ({"role": "user", "content": s.question}, {"role": "assistant", "content": s.gold})
    ]


def aggregator_shots(fam: TaskSet, k: int) -> list[dict[str, str]]:
    """Example turns in the form the orchestrator builds (the ask, then one "X says:" line per
    solver); in each, some teammates are wrong (another example's answer) and the gold one wins."""
    out: list[dict[str, str]] = []
    answers = [s.gold for s in fam.shots]
    for j, (ask, ans) in enumerate((s.question, s.gold) for s in fam.shots):
        wrong = answers[(j + 1) % len(answers)]
        lines = [f"{s} says: {ans if (i + j) % 2 == 0 else wrong}" for i, s in enumerate(solver_names(k))]
        if k > 1 and all(line.endswith(wrong) for line in lines):
            lines[0] = f"solver_0 says: {ans}"
        out += [
            {"role": "user", "content": f"{ask}\n{AGGREGATE_ASK}\n" + "\n".join(lines)},
            {"role": "assistant", "content": ans},
        ]
    return out


def reviser_shots(fam: TaskSet) -> list[dict[str, str]]:
    """Example turns of the reviser: the proposal is right in some (kept) and wrong in others
    (another example's answer, corrected)."""
    out: list[dict[str, str]] = []
    answers = [s.gold for s in fam.shots]
    for j, shot in enumerate(fam.shots):
        proposed = shot.gold if j % 2 == 0 else answers[(j + 1) % len(answers)]
        out += [
            {"role": "user", "content": f"{shot.question}\n{REVISE_ASK}\n{PROPOSER} says: {proposed}"},
            {"role": "assistant", "content": shot.gold},
        ]
    return out


class TeamPolicy(BasePolicy):
    """Round 0: the first agents (solvers, or the proposer) answer; their answers go to the last
    agent (aggregator, or reviser) as messages, except those of ``mute`` agents (a counterfactual
    run without them, for credit by forks). Round 1: the last agent answers; that is the team's
    answer. Then stop."""

    name = "team"

    def __init__(
        self,
        fam: TaskSet,
        q: TaskItem,
        k: int,
        mode: str,
        temperature: float,
        agg_temperature: float,
        topology: str = "aggregate",
        mute: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__("continue")
        self.fam, self.q, self.k, self.mode = fam, q, k, mode
        self.temperature, self.agg_temperature = temperature, agg_temperature
        self.topology, self.mute = topology, mute
        self.first, (self.last, self.last_role) = team_agents(topology, k)

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if s.agents or s.round:
            return []
        first = [
            AgentSpec(
                name,
                role,
                temperature=self.temperature,
                max_tokens=self.fam.max_new_tokens,
                model=adapter_of(self.mode, name, role),
                fewshot=solver_shots(self.fam),
            )
            for name, role in self.first
        ]
        shots = (
            aggregator_shots(self.fam, self.k) if self.topology == "aggregate" else reviser_shots(self.fam)
        )
        last = AgentSpec(
            self.last,
            self.last_role,
            temperature=self.agg_temperature,
            max_tokens=self.fam.max_new_tokens,
            model=adapter_of(self.mode, self.last, self.last_role),
            fewshot=shots,
        )
        return [*first, last]

    def delegate(self, s: RunState) -> list[Task]:
        if s.round == 0:
            return [Task(name, self.q.question) for name, _ in self.first]
        if s.round == 1:
            ask = AGGREGATE_ASK if self.topology == "aggregate" else REVISE_ASK
            return [Task(self.last, f"{self.q.question}\n{ask}")]
        return []

    def communicate(self, s: RunState, results: list[Result]) -> list[Message]:
        if s.round != 0:
            return []
        return [Message(r.agent, self.last, r.text) for r in results if r.text and r.agent not in self.mute]

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        if s.round != 1:
            return None
        return next((r.text for r in results if r.agent == self.last and r.text is not None), None)

    def stop(self, s: RunState) -> str | None:
        return super().stop(s) or ("done" if s.round >= 2 else None)


def build(config: dict[str, Any]) -> Setup:
    verifier = config.get("verifier")
    fam = family(str(config.get("family", "countries")), None if verifier is None else str(verifier))
    qid = config.get("question")
    q = question(fam, str(qid)) if qid is not None else fam.items[0]
    k = int(config.get("solvers", 2))
    if k < 1:
        raise BadInput("OT693", f"the team program needs at least one solver, got {k}")
    mode = str(config.get("adapters", "role"))
    adapter_of(mode, AGGREGATOR, AGGREGATOR)
    topology = str(config.get("topology", "aggregate"))
    team_agents(topology, k)
    mute = config.get("mute") or []
    gold = q.gold
    return Setup(
        policy=TeamPolicy(
            fam,
            q,
            k,
            mode,
            float(config.get("temperature", 0.7)),
            float(config.get("aggregator_temperature", 0.7)),
            topology,
            frozenset(str(a) for a in mute),
        ),
        task=q.question,
        topology="centralized",
        scripted=lambda seed: ScriptedBackend(fn=lambda req: gold, seed=seed),
    )


def answer_correct(fam: TaskSet, q: TaskItem, text: str | None) -> bool:
    return fam.verifier.correct(text, q)


def canonical(fam: TaskSet, q: TaskItem, text: str | None) -> str | None:
    """The answer as the task set's verifier reads it (the gold spelling when right)."""
    return None if text is None else fam.verifier.canonical(text, q.answers)


def answering(tr: Trace) -> list[tuple[int, str]]:
    """(event index, agent) of every answer (a successful return), in order."""
    return [
        (i, e.agent)
        for i, e in enumerate(tr.events)
        if e.type == "return" and e.status != "error" and e.agent
    ]


def trace_question(trace: Trace) -> tuple[TaskSet, TaskItem]:
    rt = (trace.metadata or {}).get("runtime") or {}
    cfg = rt.get("config") if isinstance(rt, dict) else None
    if not isinstance(cfg, dict) or "question" not in cfg:
        raise BadInput(
            "OT694",
            f"trace {trace.trace_id!r} was not recorded by the team program (no metadata.runtime.config.question)",
        )
    verifier = cfg.get("verifier")
    fam = family(str(cfg.get("family", "countries")), None if verifier is None else str(verifier))
    return fam, question(fam, str(cfg["question"]))


def run_question(trace: Trace, path: str) -> tuple[TaskSet, TaskItem]:
    """``trace_question`` of a recorded run read from ``path``: a question or family its config
    names that does not exist is the run's mistake, named by the run's file (it named the task
    file, which holds no mistake)."""
    try:
        return trace_question(trace)
    except OrchestraceError as e:
        raise BadInput(e.code, e.message, path=path, pointer="/metadata/runtime/config") from None


def verify(trace: Trace) -> float:
    """R1 of a team run: 1.0 when the team's final answer is right, else 0.0."""
    fam, q = trace_question(trace)
    final = ((trace.metadata or {}).get("outcome") or {}).get("final")
    return fam.verifier.score(final, q)


def verify_complete(trace: Trace) -> float:
    """R1 that also asks for a finished answer: 0.0 when the team's final answer was cut off by
    the token limit (its return event is ``truncated``), else :func:`verify`. A verifier that reads
    only the first word scores "cats\ncats and" right, so nothing in R1 keeps an agent stopping
    after its answer; this does (DAPO's overlong punishment, in its hard form)."""
    last = answering(trace)
    if last and (trace.events[last[-1][0]].attrs or {}).get("truncated"):
        return 0.0
    return verify(trace)
