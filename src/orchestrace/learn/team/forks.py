"""Credit from forks: every recorded run re-run without some agents' answers, or with the last
answer's call sampled again, and the coalition game whose values are those runs' rewards
(``--credit loo-fork``, ``--credit shapley-fork``); for a gateway program's run, the run with an
agent's call sampled again, from a replay of the user's program (:func:`resample_game`)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ...core.io import load_one
from ...core.model import Trace
from ...reward.spec import RewardSpec, compute_rewards
from ...runtime.cache import CallCache, cache_path
from .program import BadInput, answering

FORK_DIR = "forks"
#: the fork methods and the credit module's method each runs on the fork game
FORK_METHODS = {"loo-fork": "loo", "shapley-fork": "shapley"}


def fork_path(trace_path: str, agent: str) -> str:
    """The fork of a run without ``agent``'s answer (``a+b``: without several answers)."""
    p = Path(trace_path)
    return str(p.parent.parent / FORK_DIR / p.name.replace(".events.jsonl", f".without-{agent}.events.jsonl"))


def resample_path(trace_path: str, agent: str, k: int = 1) -> str:
    """The fork of a run with ``agent``'s (the last answer's) call sampled again (the ``k``-th time)."""
    p = Path(trace_path)
    name = f"resample-{agent}" if k == 1 else f"resample{k}-{agent}"
    return str(p.parent.parent / FORK_DIR / p.name.replace(".events.jsonl", f".{name}.events.jsonl"))


def resample_seed(trace_id: str, k: int) -> int:
    """The seed of the ``k``-th resample (k >= 2; the first keeps the runtime's default, the
    recorded call's seed + 1): one fixed draw per run and k."""
    return int.from_bytes(hashlib.sha256(f"{trace_id}|resample|{k}".encode()).digest()[:4], "big") >> 1


@dataclass(frozen=True)
class ForkJob:
    """One counterfactual re-run of a recorded run: an intervention at one event (``drop`` or
    ``resample``), or config changes (``mute``: several answers not relayed)."""

    path: str
    trace: Trace
    out: str
    label: str
    index: int | None = None
    do: str = "drop"
    config: dict[str, Any] = field(default_factory=dict)


async def _fork_all(backend: Any, jobs: list[ForkJob]) -> None:
    from ...runtime.cache import parse_intervention
    from ...runtime.runner import execute

    async def one(job: ForkJob) -> None:
        tr = job.trace
        rt = tr.metadata["runtime"]
        iv = None
        md = {k: v for k, v in tr.metadata.items() if k not in ("outcome", "fork")}
        if job.index is not None:
            iv = parse_intervention(job.do)
            iv.at, iv.event = job.index, tr.events[job.index].id
            md["fork"] = {
                "parent": tr.trace_id,
                "at": iv.event,
                "index": job.index,
                "do": job.do,
                "group": f"{tr.trace_id}@{iv.event}",
            }
        else:
            md["fork"] = {"parent": tr.trace_id, "config": job.config}
        await execute(
            rt["program"],
            job.out,
            config={**rt["config"], **job.config},
            seed=int(rt["seed"]),
            backend=backend,
            clock="logical",
            timeout=3600.0,
            retries=0,
            trace_id=f"{tr.trace_id}~{job.label}",
            mode="fork",
            reference=tr,
            source=CallCache(cache_path(job.path), write=False),
            intervention=iv,
            metadata=md,
        )

    await asyncio.gather(*(one(j) for j in jobs))


def run_forks(backend: Any, paths: list[str], *, subsets: bool = False, resamples: int = 1) -> list[str]:
    """For every run: the same run without each answer but the last (the aggregator's or the
    reviser's), the later calls made live; the last answer's call sampled again ``resamples``
    times (the baseline of the agent whose answer is the team's); with ``subsets`` also without
    every larger subset of the earlier answers (what exact Shapley needs). All forks run
    concurrently, batched."""
    jobs: list[ForkJob] = []
    for p in paths:
        tr = load_one(p)
        ans = answering(tr)
        if not ans:
            continue
        *earlier, (last_i, last) = ans
        for i, agent in earlier:
            jobs.append(ForkJob(p, tr, fork_path(p, agent), f"without~{agent}", i))
        jobs.append(ForkJob(p, tr, resample_path(p, last), f"resample~{last}", last_i, "resample"))
        for k in range(2, resamples + 1):
            do = f"resample:{resample_seed(tr.trace_id, k)}"
            jobs.append(ForkJob(p, tr, resample_path(p, last, k), f"resample{k}~{last}", last_i, do))
        names = [a for _, a in earlier]
        if subsets:
            for size in range(2, len(names) + 1):
                for combo in itertools.combinations(names, size):
                    label = "+".join(combo)
                    jobs.append(
                        ForkJob(p, tr, fork_path(p, label), f"without~{label}", config={"mute": list(combo)})
                    )
    for j in jobs:
        Path(j.out).parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_fork_all(backend, jobs))
    return [j.out for j in jobs]


def last_samples(trace_path: str, trace: Trace, spec: RewardSpec, resamples: int) -> list[tuple[str, float]]:
    """(fork path, R) of each resample of the run's last answer's call (``resamples`` of them)."""
    ans = answering(trace)
    if not ans:
        return []
    out = []
    for k in range(1, resamples + 1):
        p = resample_path(trace_path, ans[-1][1], k)
        if not os.path.exists(p):
            raise BadInput(
                "OT695", f"no fork of this run with its last answer sampled again ({p})", path=trace_path
            )
        out.append((p, float(compute_rewards(load_one(p), spec).channels[spec.total])))
    return out


def fork_game(
    trace_path: str, spec: RewardSpec, resampled: list[float] | None = None
) -> Callable[[Trace, Any], Any]:
    """The coalition game of one run at the agent level, from its forks. Players outside a
    coalition S: an earlier agent (a solver, the proposer) outside S has its answer dropped, so
    g(S) = R of the fork without those answers (g(everyone) = R); the last agent (aggregator,
    reviser) outside S is replaced by fresh samples of its own call on the same answers, so
    v(S) = g(S) - [last not in S] * (R - mean R_resampled). Its leave-one-out and Shapley credit is
    then R - mean R_resampled: its choice against other choices of its own policy on the same
    inputs. (Until this fix v(all but the last) was 0: the last agent got R with no baseline, so
    every run pushed its sampled answer up when the team was right, whatever it chose.) The
    orchestrator is not a player (the same in every coalition: credit 0). A coalition whose fork
    was not run (Shapley over forks made for leave-one-out only) is an error. ``resampled``: the
    rewards of the last agent's resamples (:func:`last_samples`, read once by the caller); without
    it the one resample fork is read here."""
    from ...credit import FnGame

    def reward(path: str) -> float:
        return float(compute_rewards(load_one(path), spec).channels[spec.total])

    def make(trace: Trace, units: Any) -> Any:
        if units.level != "agent":
            raise BadInput("OT695", "credit by forks is defined at the agent unit only")
        r = float(trace.rewards[spec.total])
        if "gateway" in (trace.metadata or {}):
            return resample_game(trace_path, trace, r, list(units.ids), reward)
        ans = [a for _, a in answering(trace)]
        earlier, last = ans[:-1], (ans[-1] if ans else None)
        if resampled:
            c = r - sum(resampled) / len(resampled)
        else:
            rp = resample_path(trace_path, last) if last else ""
            c = r - reward(rp) if last and os.path.exists(rp) else r

        def g(dropped: tuple[str, ...]) -> float:
            if not dropped:
                return r
            fp = fork_path(trace_path, "+".join(dropped))
            if not os.path.exists(fp):
                raise BadInput("OT695", f"no fork of this run without {', '.join(dropped)}", path=trace_path)
            return reward(fp)

        def v(coalition: frozenset[str]) -> float:
            dropped = tuple(a for a in earlier if a not in coalition)
            return g(dropped) - (c if last is not None and last not in coalition else 0.0)

        return FnGame(list(units.ids), cache(v))

    return make


def resample_game(
    trace_path: str, trace: Trace, r: float, ids: list[str], reward: Callable[[str], float]
) -> Any:
    """The coalition game of a gateway run (learn/gateway/replay.py), whose program is a black box:
    no answer can be left out of it, so every agent outside a coalition S has its first call
    sampled again (the calls asked before that answer replayed, the later ones fresh):
    v(S) = R of the fork resampling everyone outside S, v(everyone) = R. Leave-one-out credit is
    then R - R(the agent's call resampled) for every agent, as it is for the team program's last
    agent; Shapley needs the forks of every set of agents."""
    from ...credit import FnGame

    players = list(dict.fromkeys(a for _, a in answering(trace)))

    def v(coalition: frozenset[str]) -> float:
        out = [a for a in players if a not in coalition]
        if not out:
            return r
        fp = resample_path(trace_path, "+".join(out))
        if not os.path.exists(fp):
            raise BadInput("OT695", f"no fork of this run resampling {', '.join(out)}", path=trace_path)
        return reward(fp)

    return FnGame(ids, cache(v))
