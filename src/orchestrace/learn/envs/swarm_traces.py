"""Swarm traces -> the spawn decision's features and the tasks to train on.

A run of the ``swarm`` program (``orchestrace.runtime.programs.swarm``) is one Swarm episode: its
config holds the stages (subtask sizes in agent steps), and each stage's delegate decision says
how many agents it ran (``main`` alone: the orchestrator did the stage itself, k = 0).
:func:`spawn_features` rebuilds the Swarm env's observation for the next stage from that prefix
(the stages' planned Critical Steps :func:`~.swarm.stage_critical` and the orchestrator's own
context used), with the same :func:`~.swarm.stage_features` the env gives the policy in training
and offline evaluation. The planned Critical Steps are the env's step model, not the live run's
wall-clock: the live program runs every stage, where the env ends an episode at its first late stage.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...core.errors import BadInput
from ...core.model import Trace
from ...runtime.programs.swarm import stage_width
from .swarm import SwarmConfig, SwarmEnv, SwarmTask, stage_critical, stage_features

SWARM_PROGRAM = "swarm"


def swarm_config(tr: Trace, path: str = "<trace>") -> dict[str, Any]:
    """The swarm program's config of a trace; a clear error when the trace is not a swarm run."""
    rt = (tr.metadata or {}).get("runtime")
    rt = rt if isinstance(rt, dict) else {}  # not an object (a string: an internal error): no program
    if rt.get("program") != SWARM_PROGRAM:
        raise BadInput(
            "OT614",
            f"trace {tr.trace_id!r} is not a run of the swarm program (metadata.runtime.program is "
            f"{rt.get('program')!r}); a spawn policy needs the stages of a swarm run",
            path=path,
            pointer="/metadata/runtime/program",
        )
    cfg = rt.get("config") or {}
    if not isinstance(cfg, dict):
        raise BadInput("OT614", f"the swarm run's config is a {type(cfg).__name__}, not an object", path=path,
                       pointer="/metadata/runtime/config")  # fmt: skip
    return cfg


def task_from_trace(tr: Trace, path: str = "<trace>") -> SwarmTask:
    cfg = swarm_config(tr, path)
    stages = cfg.get("stages")
    if not isinstance(stages, list) or not stages:
        raise BadInput("OT614", "the swarm run has no stages in its config", path=path,
                       pointer="/metadata/runtime/config/stages")  # fmt: skip
    for i, s in enumerate(stages):  # int() of a stage that is a number or of "abc" was an internal
        # error, of "3" or 2.7 a silent 3 or 2; the program takes lists of positive ints
        if (
            not isinstance(s, list)
            or not s
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s)
        ):
            raise BadInput("OT614", f"a stage is a non-empty list of positive integers (subtask sizes), got {s!r:.60}",
                           path=path, pointer=f"/metadata/runtime/config/stages/{i}")  # fmt: skip
    return SwarmTask(str(cfg.get("task_id", tr.task_id)), [list(s) for s in stages])


def stage_widths(tr: Trace) -> list[int]:
    """k of every stage run so far, from the stages' delegate decisions in trace order."""
    return [
        stage_width(list((e.attrs or {}).get("value") or []))
        for e in tr.events
        if e.type == "orchestrator_decision" and (e.attrs or {}).get("decision") == "delegate"
    ]


def spawn_features(tr: Trace, cfg: SwarmConfig, path: str = "<trace>") -> np.ndarray | None:
    """The Swarm observation for the next stage of a swarm run (None when every stage has run)."""
    task = task_from_trace(tr, path)
    ks = stage_widths(tr)
    s = len(ks)
    if s >= len(task.stages):
        return None
    crit = sum(stage_critical(d, k) for d, k in zip(task.stages, ks, strict=False))
    ctx = sum(sum(d) for d, k in zip(task.stages, ks, strict=False) if k == 0)
    return stage_features(task, s, crit, ctx, cfg)


def tasks_from_traces(pattern: str | Sequence[str]) -> list[SwarmTask]:
    """``train swarm --traces``: the staged tasks of the swarm runs under ``pattern`` (the env
    replays any spawn widths on them), in path order."""
    from ...core.io import load_one
    from ..stopping.traces import trace_paths

    return [task_from_trace(load_one(p), p) for p in trace_paths(pattern)]


def make_env(**kwargs: Any) -> SwarmEnv:
    """``gymnasium.make("orchestrace/Swarm-v0", ...)``: a :class:`SwarmEnv`, whose ``tasks`` may be
    recorded swarm runs by path or glob (:func:`tasks_from_traces`), as the other envs take files."""
    tasks = kwargs.get("tasks")
    if isinstance(tasks, str | os.PathLike):
        kwargs["tasks"] = tasks_from_traces(os.fspath(tasks))
    return SwarmEnv(**kwargs)
