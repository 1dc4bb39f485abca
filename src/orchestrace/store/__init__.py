"""The trace store: an embedded DuckDB file (the default), Parquet export, and Ray for scale.

``ingest`` loads trace files in one transaction, idempotent by trace id; ``query`` runs SQL;
``iter_store_traces`` reads traces back unchanged; ``export_parquet`` writes hive-partitioned
Parquet; ``map_traces`` runs a function over a store's traces, locally or as Ray tasks
(``orchestrace.parallel``), with the same results.
Tables are documented in docs/store.md and ``schema.TABLES``.

DuckDB and pyarrow (the ``store`` extra) are imported on first use of what needs them, so the
CLI works without them installed.
"""

from __future__ import annotations

import importlib
from typing import Any

from .schema import METRIC_SOURCES, STORE_VERSION, TABLES

_LAZY = {
    "ON_ERROR": "db",
    "IngestAborted": "db",
    "IngestReport": "db",
    "StoreError": "db",
    "connect": "db",
    "ingest": "db",
    "is_store_path": "db",
    "iter_store_traces": "db",
    "query": "db",
    "stats": "db",
    "trace_ids": "db",
    "traces_of": "db",
    "export_parquet": "parquet",
    "Failure": "rows",
    "agent_cost_ray": "parquet",
    "read_parquet": "parquet",
    "map_traces": "db",
}


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{mod}", __name__), name)


__all__ = [
    "METRIC_SOURCES",
    "STORE_VERSION",
    "TABLES",
    *_LAZY,
]
