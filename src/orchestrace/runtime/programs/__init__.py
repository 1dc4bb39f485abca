"""The runtime's programs: each ``build(config)`` returns a :class:`Setup` the runner executes
(``orchestrace run NAME``; your own is ``module:function``).

- ``centralized``: an orchestrator fans sub-tasks out to parallel workers and joins the answers.
- ``pec``: planner -> executor (with a calculator tool) -> critic, looping until the critic accepts.
- ``debate``: debaters answer, read each other's answers, and answer again; majority vote decides.
- ``vote``: self-consistency in parallel waves, asking the stop decision after every finished worker.
- ``route``: one question routed to one of several models (the delegate decision).
- ``swarm``: a staged task, the spawn width of each stage a decision.

Programs of the packages above the runtime are not named here: they register under the
``orchestrace.programs`` entry-point group (pyproject.toml), as learn's ``team`` does (k solvers
answer a bank question, an aggregator reads their answers), and ``runner.load_program`` finds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..backends.scripted import ScriptedBackend
from ..orchestrator import Policy

PROGRAMS = {
    "centralized": "orchestrace.runtime.programs.centralized:build",
    "pec": "orchestrace.runtime.programs.pec:build",
    "debate": "orchestrace.runtime.programs.debate:build",
    "vote": "orchestrace.runtime.programs.vote:build",
    "route": "orchestrace.runtime.programs.route:build",
    "swarm": "orchestrace.runtime.programs.swarm:build",
}


@dataclass
class Setup:
    policy: Policy
    task: str
    topology: str
    tools: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    policies: dict[str, Callable[[], Policy]] = field(default_factory=dict)
    scripted: Callable[[int], ScriptedBackend] | None = None
    learnable: tuple[str, ...] = ()  # decisions a learned policy may answer (runtime/learned.py)
