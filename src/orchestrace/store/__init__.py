"""The trace store: an embedded DuckDB file (the default), Parquet export, and Ray for scale.

``ingest`` loads trace files in one transaction, idempotent by trace id; ``query`` runs SQL;
``iter_store_traces`` reads traces back unchanged; ``export_parquet`` writes hive-partitioned
Parquet; ``ray_exec`` runs bulk work as Ray tasks with the same results as local mode.
Tables are documented in docs/store.md and ``schema.TABLES``.
"""

from .db import (
    ON_ERROR,
    IngestAborted,
    IngestReport,
    StoreError,
    connect,
    ingest,
    is_store_path,
    iter_store_traces,
    query,
    stats,
    trace_ids,
    traces_of,
)
from .parquet import export_parquet
from .ray_exec import (
    RayCommand,
    RayOption,
    agent_cost_ray,
    map_traces,
    parallel_imap,
    parallel_map,
    read_parquet,
)
from .rows import Failure
from .schema import METRIC_SOURCES, STORE_VERSION, TABLES

__all__ = [
    "METRIC_SOURCES",
    "ON_ERROR",
    "STORE_VERSION",
    "TABLES",
    "Failure",
    "IngestAborted",
    "IngestReport",
    "RayCommand",
    "RayOption",
    "StoreError",
    "agent_cost_ray",
    "connect",
    "export_parquet",
    "ingest",
    "is_store_path",
    "iter_store_traces",
    "map_traces",
    "parallel_imap",
    "parallel_map",
    "query",
    "read_parquet",
    "stats",
    "trace_ids",
    "traces_of",
]
