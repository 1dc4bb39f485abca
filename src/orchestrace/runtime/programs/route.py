"""Route one question to one of several models (the delegate decision, O2).

Round 0 spawns one agent per model (``model:NAME``: a handle on that model, no call yet), the
delegate decision sends the question to one of them, its answer is the run's answer. Without a
learned policy the question goes to ``default``; with ``--policy delegate=PATH`` the policy picks
from the question's text and group (``orchestrace.learn``'s delegate feature function).

Config: ``question`` (str, required), ``group`` (str, the query's group or subject; default ""),
``models`` (list of model names; default ``["small", "large"]``), ``default`` (the model used
without a policy; default the first), ``max_tokens`` (32), ``temperature`` (0.0), ``system``.
Other keys (``question_id``, ``gold``) are kept in the metadata for whoever scores the run.
"""

from __future__ import annotations

from typing import Any

from ...core.errors import OrchestraceError
from ..backends.scripted import ScriptedBackend
from ..orchestrator import AgentSpec, BasePolicy, Result, RunState, Task
from . import Setup

AGENT_PREFIX = "model:"


class RoutePolicy(BasePolicy):
    name = "route"

    def __init__(self, question: str, models: list[str], default: str, *, system: str, max_tokens: int,
                 temperature: float) -> None:  # fmt: skip
        super().__init__("continue")
        self.question, self.models, self.default = question, models, default
        self.system, self.max_tokens, self.temperature = system, max_tokens, temperature
        self.routed = False

    def spawn(self, s: RunState) -> list[AgentSpec]:
        if s.round > 0:
            return []
        return [
            AgentSpec(AGENT_PREFIX + m, "model", self.system, self.temperature, self.max_tokens, model=m)
            for m in self.models
        ]

    def delegate_options(self, s: RunState) -> list[str]:
        """The agents the question may go to, in ``models`` order (empty once it was routed)."""
        return [] if self.routed else [AGENT_PREFIX + m for m in self.models]

    def delegate_to(self, s: RunState, agent: str) -> list[Task]:
        self.routed = True
        return [Task(agent, self.question)]

    def delegate(self, s: RunState) -> list[Task]:
        return self.delegate_to(s, AGENT_PREFIX + self.default) if not self.routed else []

    def aggregate(self, s: RunState, results: list[Result]) -> str | None:
        return next((r.text for r in s.results if r.text), None)

    def stop(self, s: RunState) -> str | None:
        return "answered" if s.results else None


def build(config: dict[str, Any]) -> Setup:
    question = config.get("question")
    if not isinstance(question, str) or not question.strip():
        raise OrchestraceError("OT604", "route: config 'question' must be a non-empty string")
    models = config.get("models", ["small", "large"])
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
        raise OrchestraceError("OT604", "route: config 'models' must be a non-empty list of model names")
    if len(set(models)) != len(models):
        raise OrchestraceError("OT604", f"route: config 'models' names a model twice: {models}")
    default = config.get("default", models[0])
    if default not in models:
        raise OrchestraceError("OT604", f"route: config 'default' {default!r} is not one of {models}")
    if not isinstance(config.get("group", ""), str):
        raise OrchestraceError("OT604", "route: config 'group' must be a string")
    policy = RoutePolicy(
        question,
        models,
        default,
        system=str(config.get("system", "You are a careful assistant. Answer briefly.")),
        max_tokens=int(config.get("max_tokens", 32)),
        temperature=float(config.get("temperature", 0.0)),
    )
    return Setup(
        policy=policy,
        task=question,
        topology="centralized",
        learnable=("delegate",),
        scripted=lambda seed: ScriptedBackend(
            choices=list(config.get("scripted_choices") or ["A", "B"]), seed=seed
        ),
    )
