"""RL algorithms, one readable file each (CleanRL style), each with ``Args`` and
``train(task, args, progress)``; :data:`ALGORITHMS` and :func:`algorithm` are their one registry
(``train stop`` and the Gymnasium experiments alike)."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from ...core.errors import OrchestraceError

ALGORITHMS = ("exact", "reinforce", "ppo", "grpo")


def check_algorithm(name: str) -> None:
    """OT630 for a name that is not an algorithm (before anything slow starts)."""
    if name not in ALGORITHMS:
        raise OrchestraceError("OT630", f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")


def algorithm(name: str) -> ModuleType:
    """The algorithm file ``name`` (imported on first use: it pulls in torch)."""
    check_algorithm(name)
    return import_module(f"{__name__}.{name}")
