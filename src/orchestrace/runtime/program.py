"""What a program is: a function ``build(config) -> Setup`` that the runner executes (the examples
in ``examples/``, learn's ``team``, or your own, named ``module:function``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .backends.scripted import ScriptedBackend
from .orchestrator import Policy


@dataclass
class Setup:
    policy: Policy
    task: str
    topology: str
    tools: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    policies: dict[str, Callable[[], Policy]] = field(default_factory=dict)
    scripted: Callable[[int], ScriptedBackend] | None = None
    learnable: tuple[str, ...] = ()  # decisions a learned policy may answer (runtime/learned.py)
