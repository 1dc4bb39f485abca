"""Per-iteration scalars of a training run (``--log tensorboard`` or ``--log mlflow``).

A training command opens one log for its run (:func:`open_log`, under ``OUT/<kind>``); whatever
finishes an iteration inside it calls :func:`log_scalars` (``learn/loop.py`` for ``train team``
and ``loop stop``, ``rl/curve.record`` for every algorithm of ``learn/rl``), so no trainer carries
a writer through its signatures. A command that trains several policies gives each its own run
(:func:`child_run`), so the viewer draws one curve per policy. Every call also logs
``time/seconds_per_iteration``: the time since the run's previous call (or its opening).

* ``tensorboard``: event files under ``OUT/tensorboard`` (a run is a subfolder), written with
  ``tensorboardX`` (numpy and protobuf only) and flushed at every call, so ``tensorboard --logdir``
  shows a run while it trains.
* ``mlflow``: one SQLite file, ``OUT/mlflow/mlflow.db`` (experiment ``orchestrace``, one MLflow run
  per run here), written with ``mlflow-skinny``'s client; never a server, and MLflow's usage
  telemetry is switched off before it is imported. ``mlflow ui --backend-store-uri
  sqlite:///OUT/mlflow/mlflow.db`` (the full ``mlflow`` package) shows it. (Its plain-folder store
  is in maintenance mode and refuses to open without an opt-out: SQLite is MLflow's local default.)
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.errors import OrchestraceError
from ..core.paths import make_dirs

LOG_FORMATS = ("tensorboard", "mlflow")
MLFLOW_DB = "mlflow.db"
MLFLOW_EXPERIMENT = "orchestrace"


class _Sink(Protocol):
    def write(self, step: int, scalars: Mapping[str, float]) -> None: ...
    def close(self) -> None: ...


class _TensorBoard:
    def __init__(self, root: Path, name: str) -> None:
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(str(root / safe_name(name) if name else root))

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        for tag, value in scalars.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _MLflow:
    def __init__(self, root: Path, name: str) -> None:
        self.client, experiment = mlflow_store(root)
        self.run_id = self.client.create_run(experiment, run_name=name or root.parent.name).info.run_id

    def write(self, step: int, scalars: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        ms = int(time.time() * 1000)
        self.client.log_batch(self.run_id, metrics=[Metric(k, v, ms, step) for k, v in scalars.items()])

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


_SINKS = {"tensorboard": _TensorBoard, "mlflow": _MLflow}


@dataclass
class _Run:
    kind: str
    root: Path
    name: str
    last: float  # time.perf_counter() of the previous call, or of the opening
    sink: _Sink | None = None  # opened at the first call: a run that logs nothing leaves no trace


_root: ContextVar[tuple[str, Path] | None] = ContextVar("scalar_log_root", default=None)
_run: ContextVar[_Run | None] = ContextVar("scalar_log_run", default=None)


def check_log(kind: str | None) -> None:
    if kind is not None and kind not in LOG_FORMATS:
        raise OrchestraceError("OT682", f"unknown --log {kind!r}; known: {', '.join(LOG_FORMATS)}")


def log_folder(kind: str, out: str | Path) -> Path:
    """Where ``--log kind`` of a command writing to ``out`` goes: ``out/<kind>``."""
    return Path(out) / kind


def mlflow_store(root: Path) -> tuple[Any, str]:
    """The MLflow client of the SQLite store under ``root`` (created on first use) and the id of
    its ``orchestrace`` experiment (artifacts, if any, next to the database)."""
    os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"  # before the import: no network, ever
    import logging
    import warnings

    with warnings.catch_warnings():  # SQLAlchemy deprecations inside MLflow's own store
        warnings.simplefilter("ignore")
        from mlflow.tracking import MlflowClient

        # after the import, which sets MLflow's logger to INFO: creating a store logs its migrations
        for name in ("mlflow", "alembic"):
            logging.getLogger(name).setLevel(logging.WARNING)
        make_dirs(root)
        client = MlflowClient(tracking_uri=f"sqlite:///{(root / MLFLOW_DB).resolve()}")
    found = client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    if found is not None:
        return client, found.experiment_id
    artifacts = (root / "artifacts").resolve().as_uri()
    return client, client.create_experiment(MLFLOW_EXPERIMENT, artifact_location=artifacts)


def prepare_log(kind: str | None, out: str | Path) -> None:
    """Create the store a log will write to before several processes open it at once (Ray
    workers of ``train stop``): MLflow's SQLite tables are created by the first client."""
    check_log(kind)
    if kind == "mlflow":
        mlflow_store(log_folder(kind, out))


@contextmanager
def open_log(kind: str | None, out: str | Path, run: str = "") -> Iterator[Path | None]:
    """Log the scalars of what runs inside under ``out/<kind>`` (``kind`` None: log nothing), to
    the run ``run`` ("": the log's own, named after ``out`` in MLflow). Yields the folder (or None)."""
    check_log(kind)
    if kind is None:
        yield None
        return
    root = log_folder(kind, out)
    token = _root.set((kind, root))
    try:
        with child_run(run):
            yield root
    finally:
        _root.reset(token)


@contextmanager
def child_run(name: str) -> Iterator[None]:
    """Inside an open log: the scalars logged inside go to the run ``name`` (TensorBoard: a
    subfolder, "" the log's own folder; MLflow: a run of that name). Outside one: nothing."""
    root = _root.get()
    if root is None:
        yield
        return
    run = _Run(*root, name, time.perf_counter())
    token = _run.set(run)
    try:
        yield
    finally:
        _run.reset(token)
        if run.sink is not None:
            run.sink.close()


def is_logging() -> bool:
    """Whether figures logged here go anywhere (a trainer may skip measuring what only a log shows)."""
    return _run.get() is not None


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
    finite = {
        prefix + key: float(value)
        for key, value in scalars.items()
        if not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    }
    if run.sink is None:
        run.sink = _SINKS[run.kind](run.root, run.name)
    run.sink.write(step, finite | {"time/seconds_per_iteration": now - run.last})
    run.last = now
