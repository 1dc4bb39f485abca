"""Per-iteration scalars of a training run as TensorBoard event files (``--log tensorboard``).

A training command opens one log for its run (:func:`open_log`, event files under one folder);
whatever finishes an iteration inside it calls :func:`log_scalars` (``learn/loop.py`` for
``train team`` and ``loop stop``, ``rl/common.record`` for every algorithm of ``learn/rl``), so
no trainer carries a writer through its signatures. A command that trains several policies gives
each its own run (:func:`child_run`, a subfolder), so TensorBoard draws one curve per policy.
Every call also logs ``time/seconds_per_iteration``: the time since the run's previous call (or
its opening). Event files are written with ``tensorboardX`` (numpy and protobuf only) and flushed
at every call, so ``tensorboard --logdir`` shows a run while it trains.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import OrchestraceError

LOG_FORMATS = ("tensorboard",)
LOG_DIR = "tensorboard"  # the folder a command's events go to, under its output folder


@dataclass
class _Run:
    writer: Any  # a tensorboardX SummaryWriter
    last: float  # time.perf_counter() of the previous call, or of the opening


_root: ContextVar[Path | None] = ContextVar("scalar_log_root", default=None)
_run: ContextVar[_Run | None] = ContextVar("scalar_log_run", default=None)


def check_log(kind: str | None) -> None:
    if kind is not None and kind not in LOG_FORMATS:
        raise OrchestraceError("OT682", f"unknown --log {kind!r}; known: {', '.join(LOG_FORMATS)}")


@contextmanager
def open_log(kind: str | None, folder: str | Path) -> Iterator[Path | None]:
    """Log the scalars of what runs inside to event files under ``folder`` (``kind`` None: log
    nothing). Yields the folder (or None)."""
    check_log(kind)
    if kind is None:
        yield None
        return
    token = _root.set(Path(folder))
    try:
        with child_run(""):
            yield Path(folder)
    finally:
        _root.reset(token)


@contextmanager
def child_run(name: str) -> Iterator[None]:
    """Inside an open log: the scalars logged inside go to the run ``name`` (a subfolder; "" is the
    log's own folder). Outside one: nothing."""
    root = _root.get()
    if root is None:
        yield
        return
    from tensorboardX import SummaryWriter

    folder = root / safe_name(name) if name else root
    writer = SummaryWriter(str(folder))
    token = _run.set(_Run(writer, time.perf_counter()))
    try:
        yield
    finally:
        _run.reset(token)
        writer.close()


def safe_name(name: str) -> str:
    """A run name as one folder name (``learned+agg(c=0.01)`` -> ``learned+agg_c=0.01``)."""
    return re.sub(r"[^\w.+=-]+", "_", name).strip("_") or "run"


def log_scalars(step: int, scalars: Mapping[str, Any], prefix: str = "") -> None:
    """Write every finite number of ``scalars`` at ``step`` (tags ``prefix + key``) and the seconds
    since the previous call; nothing when no log is open."""
    run = _run.get()
    if run is None:
        return
    now = time.perf_counter()
    for key, value in scalars.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            continue
        run.writer.add_scalar(prefix + key, float(value), step)
    run.writer.add_scalar("time/seconds_per_iteration", now - run.last, step)
    run.last = now
    run.writer.flush()
