"""Where rollouts run (the local model, Ray workers or an OpenAI-compatible server); not part of
the configuration, since the results do not depend on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import TeamModel
from .program import BadInput


@dataclass(frozen=True)
class RolloutPlace:
    """Where rollouts run (not part of the configuration: the results do not depend on it).

    ``ray``: an address or ``local``, rollouts on ``ray_workers`` Ray actors; ``server``: the
    base URL of an OpenAI-compatible server with vLLM's LoRA endpoints, adapters pushed as peft
    folders under ``server_adapters`` (read by the server at ``server_dir``, default the same path)."""

    ray: str | None = None
    ray_workers: int = 2
    server: str | None = None
    server_adapters: str = "runs/served-adapters"
    server_dir: str | None = None


def remote_rollouts(model: TeamModel, place: RolloutPlace, threads: int | None = None) -> Any:
    """The rollout runner ``place`` asks for (``run(model, rollouts)``), or None to run them here."""
    if place.ray is not None and place.server is not None:
        raise BadInput("OT695", "rollouts run either on Ray workers or on a server, not both")
    if place.ray is not None:
        from .remote import RayRollouts

        return RayRollouts(model, address=place.ray, workers=place.ray_workers, threads=threads)
    if place.server is not None:
        from .served import ServedRollouts

        return ServedRollouts(
            model, base_url=place.server, adapter_dir=place.server_adapters, server_dir=place.server_dir
        )
    return None
