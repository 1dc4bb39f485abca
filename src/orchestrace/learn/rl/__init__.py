"""RL algorithms, one readable file each (CleanRL style), each with ``Args`` and
``train(task, args, progress)``; :data:`ALGORITHMS` and :func:`algorithm` are their one registry
(``train stop`` and the Gymnasium experiments alike)."""

from __future__ import annotations

from importlib import import_module
from types import ModuleType

from ...core.errors import OrchestraceError

ALGORITHMS = ("exact", "reinforce", "ppo", "grpo")
#: The algorithms that take several epochs of PPO's clipped surrogate per batch (``clipped_update``
#: in :mod:`.ppo`), so an approximate-KL target can end an update early; exact PG and REINFORCE
#: take one gradient step per batch.
EPOCH_ALGORITHMS = ("ppo", "grpo")


def check_algorithm(name: str) -> None:
    """OT630 for a name that is not an algorithm (before anything slow starts)."""
    if name not in ALGORITHMS:
        raise OrchestraceError("OT630", f"unknown algorithm {name!r}; known: {', '.join(ALGORITHMS)}")


def check_target_kl(target_kl: float | None, algo: str) -> None:
    """OT630 for ``--target-kl`` with an algorithm that has no epochs to stop, or not above 0."""
    if target_kl is None:
        return
    if algo not in EPOCH_ALGORITHMS:
        raise OrchestraceError(
            "OT630",
            f"--target-kl applies to ppo and grpo (epochs per batch), not {algo} (one step per batch)",
        )
    if not target_kl > 0:
        raise OrchestraceError("OT630", f"--target-kl must be > 0, got {target_kl}")


def algorithm(name: str) -> ModuleType:
    """The algorithm file ``name`` (imported on first use: it pulls in torch)."""
    check_algorithm(name)
    return import_module(f"{__name__}.{name}")
