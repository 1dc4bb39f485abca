"""Running recorded runs: many at once in one event loop, so that a batching backend (the local
model, or a server) sees their calls together.

A :class:`Rollout` names everything a run needs (program, its config, seed, trace path), so
:func:`run_rollouts` knows nothing of the training configuration: any program and any backend."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.io import load_one
from ...core.model import Trace


@dataclass(frozen=True)
class Rollout:
    """One run to record: a runtime program with its config and seed, and where its trace goes."""

    program: str
    seed: int
    path: str
    trace_id: str
    config: dict[str, Any] = field(default_factory=dict)


async def _run_all(backend: Any, rollouts: list[Rollout]) -> None:
    from ...runtime.runner import execute

    await asyncio.gather(
        *(
            execute(
                r.program,
                r.path,
                config=r.config,
                seed=r.seed,
                backend=backend,
                clock="logical",
                timeout=3600.0,
                retries=0,
                trace_id=r.trace_id,
            )
            for r in rollouts
        )
    )


def run_rollouts(backend: Any, rollouts: list[Rollout]) -> list[Trace]:
    """Run every rollout concurrently (one batch per round across all of them); validated traces."""
    for r in rollouts:
        Path(r.path).parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_run_all(backend, rollouts))
    return [load_one(r.path) for r in rollouts]
