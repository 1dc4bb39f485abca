"""What training returns: the saved policy and its learning curve, one row per iteration."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import nn

from ..scalar_log import log_scalars

if TYPE_CHECKING:
    from .tasks import SavedPolicy, Task


@dataclass
class TrainResult:
    policy: SavedPolicy
    history: list[dict[str, float]] = field(default_factory=list)


def record(
    history: list[dict[str, float]],
    it: int,
    batch_reward: float,
    task: Task,
    actor: nn.Module,
    *,
    iterations: int,
    eval_every: int,
    progress: Callable[[int], None] | None,
    figures: dict[str, float] | None = None,
) -> None:
    """Learning-curve bookkeeping shared by every algorithm: the batch reward of iteration ``it``
    (0-based), the task's evaluation (StopVote: greedy on the pool) every ``eval_every``
    iterations and at both ends, a progress tick; all of it and the update's ``figures`` (PPO's
    approximate KL, clip fraction, entropy) to the open scalar log (``--log``)."""
    last = it in (0, iterations - 1) or (it + 1) % eval_every == 0
    evaluation = task.evaluate(actor) if last else {}
    history.append({"iteration": it + 1, "batch_reward": batch_reward, **evaluation})
    log_scalars(
        it + 1,
        {"train/reward": batch_reward}
        | {f"train/{k}": v for k, v in (figures or {}).items()}
        | {f"heldout/{k}": v for k, v in evaluation.items()},
    )
    if progress:
        progress(1)
