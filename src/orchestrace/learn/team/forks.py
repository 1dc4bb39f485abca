"""Leave-one-out credit from forks: every recorded run re-run without one agent's answer, and the
coalition game whose values are those runs' rewards (``--credit loo-fork``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.io import load_one
from ...core.model import Trace
from ...reward.spec import RewardSpec, compute_rewards
from ...runtime.cache import CallCache, cache_path
from .program import BadInput

FORK_DIR = "forks"


def fork_path(trace_path: str, agent: str) -> str:
    p = Path(trace_path)
    return str(p.parent.parent / FORK_DIR / p.name.replace(".events.jsonl", f".without-{agent}.events.jsonl"))


async def _fork_all(backend: Any, jobs: list[tuple[str, Trace, int, str]]) -> None:
    from ...runtime.cache import parse_intervention
    from ...runtime.runner import execute

    async def one(path: str, tr: Trace, index: int, out: str) -> None:
        rt = tr.metadata["runtime"]
        iv = parse_intervention("drop")
        iv.at, iv.event = index, tr.events[index].id
        md = {k: v for k, v in tr.metadata.items() if k not in ("outcome", "fork")}
        md["fork"] = {
            "parent": tr.trace_id,
            "at": iv.event,
            "index": index,
            "do": "drop",
            "group": f"{tr.trace_id}@{iv.event}",
        }
        await execute(
            rt["program"],
            out,
            config=rt["config"],
            seed=int(rt["seed"]),
            backend=backend,
            clock="logical",
            timeout=3600.0,
            retries=0,
            trace_id=f"{tr.trace_id}~without~{tr.events[index].agent}",
            mode="fork",
            reference=tr,
            source=CallCache(cache_path(path), write=False),
            intervention=iv,
            metadata=md,
        )

    await asyncio.gather(*(one(*j) for j in jobs))


def run_forks(backend: Any, paths: list[str]) -> list[str]:
    """For every run and every agent but the last to answer (the aggregator): the same run with
    that agent's answer dropped, the later calls made live (all forks concurrently, batched)."""
    jobs = []
    for p in paths:
        tr = load_one(p)
        returns = [i for i, e in enumerate(tr.events) if e.type == "return" and e.status != "error"]
        for i in returns[:-1]:
            out = fork_path(p, tr.events[i].agent)
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            jobs.append((p, tr, i, out))
    asyncio.run(_fork_all(backend, jobs))
    return [j[3] for j in jobs]


def fork_game(trace_path: str, spec: RewardSpec) -> Callable[[Trace, Any], Any]:
    """The coalition game of one run for leave-one-out credit at the agent level, from its forks:
    v(all) = R; v(all but an agent whose answer was dropped) = R of that fork; v(all but the last
    answering agent or the orchestrator) = 0 (the team gives no answer). Only leave-one-out
    coalitions are defined (Shapley would need every subset re-run)."""
    from ...credit import FnGame

    def make(trace: Trace, units: Any) -> Any:
        if units.level != "agent":
            raise BadInput("OT695", "loo-fork credit is defined at the agent unit only")
        r = float(trace.rewards[spec.total])
        without: dict[str, float] = {}
        for agent in units.ids:
            fp = fork_path(trace_path, agent)
            if Path(fp).exists():
                ft = load_one(fp)
                without[agent] = float(compute_rewards(ft, spec).channels[spec.total])
        everyone = frozenset(units.ids)

        def v(coalition: frozenset[str]) -> float:
            if coalition == everyone:
                return r
            (gone,) = everyone - coalition  # leave_one_out asks only for these
            return without.get(gone, 0.0)

        return FnGame(list(units.ids), v)

    return make
