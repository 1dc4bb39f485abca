"""A staged task whose spawn width is a decision (O1): how many workers for each stage.

The task is a list of stages, each a list of subtasks (their sizes in agent steps). Round s runs
stage s: the spawn decision picks k in 0..``max_agents``; k = 0 hands the whole stage to ``main``
(the orchestrator's own thread, one agent kept over the run), k >= 1 spawns k fresh workers
``s{s}.w{i}`` and gives each a share of the subtasks (longest first, to the least loaded:
:func:`assign`); a worker left without a subtask is still asked (spurious parallelism shows in the
trace). Without a learned policy k is one worker per subtask (at most ``max_agents``); with
``--policy spawn=PATH`` the policy picks k from the trace so far (``orchestrace.learn``'s spawn
feature function: the stage's subtasks, the planned Critical Steps and the orchestrator's own
context used by the stages before).

Config: ``stages`` (list of lists of positive ints, required), ``max_agents`` (8),
``max_tokens`` (16), ``temperature`` (0.0), ``system``.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import OrchestraceError
from ..backends.scripted import ScriptedBackend
from ..orchestrator import AgentSpec, BasePolicy, Result, RunState, Task
from . import Setup

MAIN = "main"


def assign(durations: list[int], k: int) -> list[list[int]]:
    """Longest-processing-time assignment of subtask indices to k agents, heaviest agent first."""
    loads = [0] * k
    groups: list[list[int]] = [[] for _ in range(k)]
    for j in sorted(range(len(durations)), key=lambda j: (-durations[j], j)):
        a = min(range(k), key=loads.__getitem__)
        groups[a].append(j)
        loads[a] += durations[j]
    order = sorted(range(k), key=lambda a: (-loads[a], a))
    return [groups[a] for a in order]


def stage_width(agents: list[str]) -> int:
    """k of a stage from the agents its delegate decision sent tasks to (``main`` alone: 0)."""
    return 0 if agents == [MAIN] else len(agents)


class SwarmPolicy(BasePolicy):
    name = "swarm"

    def __init__(self, stages: list[list[int]], max_agents: int, *, system: str, max_tokens: int,
                 temperature: float) -> None:  # fmt: skip
        super().__init__("continue")
        self.stages, self.max_agents = stages, max_agents
        self.system, self.max_tokens, self.temperature = system, max_tokens, temperature
        self.width: dict[int, int] = {}

    def _spec(self, name: str, role: str) -> AgentSpec:
        return AgentSpec(name, role, self.system, self.temperature, self.max_tokens)

    def spawn_options(self, s: RunState) -> int | None:
        return self.max_agents if s.round < len(self.stages) and s.round not in self.width else None

    def spawn_width(self, s: RunState, k: int) -> list[AgentSpec]:
        self.width[s.round] = k
        if k == 0:
            return [] if MAIN in s.agents else [self._spec(MAIN, "orchestrator_self")]
        return [self._spec(f"s{s.round}.w{i}", "worker") for i in range(k)]

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if self.spawn_options(s) is None:
            return []
        return self.spawn_width(s, min(len(self.stages[s.round]), self.max_agents))

    def delegate(self, s: RunState) -> list[Task]:
        if s.round >= len(self.stages):
            return []
        durs, k = self.stages[s.round], self.width[s.round]
        if k == 0:
            return [Task(MAIN, _prompt(s.round, list(range(len(durs))), durs))]
        return [Task(f"s{s.round}.w{i}", _prompt(s.round, g, durs)) for i, g in enumerate(assign(durs, k))]

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        return f"stage {s.round}: {sum(r.status == 'ok' for r in results)}/{len(results)} agents ok"

    def stop(self, s: RunState) -> str | None:
        return "done" if s.round >= len(self.stages) else None


def _prompt(stage: int, subtasks: list[int], durs: list[int]) -> str:
    if not subtasks:
        return f"Stage {stage}: no subtask is assigned to you. Reply 'idle'."
    items = ", ".join(f"#{j} ({durs[j]} steps)" for j in subtasks)
    return f"Stage {stage}: do subtasks {items}. Reply 'done' when finished."


def build(config: dict[str, Any]) -> Setup:
    stages = config.get("stages")
    if (
        not isinstance(stages, list)
        or not stages
        or not all(
            isinstance(st, list)
            and st
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in st)
            for st in stages
        )
    ):
        raise OrchestraceError(
            "OT604", "swarm: config 'stages' must be a non-empty list of lists of positive ints"
        )
    k = config.get("max_agents", 8)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise OrchestraceError("OT604", f"swarm: config 'max_agents' must be a positive integer, got {k!r}")
    policy = SwarmPolicy(
        stages,
        k,
        system=str(config.get("system", "You are a worker. Answer briefly.")),
        max_tokens=int(config.get("max_tokens", 16)),
        temperature=float(config.get("temperature", 0.0)),
    )
    return Setup(
        policy=policy,
        task=f"a staged task of {sum(len(st) for st in stages)} subtasks in {len(stages)} stages",
        topology="swarm",
        learnable=("spawn",),
        scripted=lambda seed: ScriptedBackend(choices=["done"], seed=seed),
    )
