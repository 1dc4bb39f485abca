"""Running the team program: many recorded runs at once in one event loop, so that a batching
backend (the local model, or a server) sees their calls together."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.io import load_one
from ...core.model import Trace

if TYPE_CHECKING:
    from .trainer import TeamConfig


@dataclass(frozen=True)
class Rollout:
    question: str
    seed: int
    path: str


async def _run_all(backend: Any, cfg: TeamConfig, rollouts: list[Rollout]) -> None:
    from ...runtime.runner import execute

    await asyncio.gather(
        *(
            execute(
                cfg.program,
                r.path,
                config={
                    "family": cfg.family,
                    "question": r.question,
                    "solvers": cfg.solvers,
                    "adapters": cfg.adapters,
                    "temperature": cfg.temperature,
                    "aggregator_temperature": cfg.aggregator_temperature,
                },
                seed=r.seed,
                backend=backend,
                clock="logical",
                timeout=3600.0,
                retries=0,
                trace_id=f"team-{r.question}-s{r.seed}",
            )
            for r in rollouts
        )
    )


def run_rollouts(backend: Any, cfg: TeamConfig, rollouts: list[Rollout]) -> list[Trace]:
    """Run every rollout concurrently (one batch per round across all of them); validated traces."""
    for r in rollouts:
        Path(r.path).parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_run_all(backend, cfg, rollouts))
    return [load_one(r.path) for r in rollouts]
