"""Parquet export: one folder per table, hive-partitioned by ``system=`` and ``date=``.

Plain Parquet with string/number columns (JSON columns become strings), so DuckDB
(``read_parquet('DIR/events/**/*.parquet', hive_partitioning=true)``), Polars
(``pl.scan_parquet('DIR/events/**/*.parquet', hive_partitioning=True)``), pyarrow
(``pyarrow.dataset.dataset('DIR/events', partitioning='hive')``), Spark and Ray Data read it
without our code. A table without rows is one ``empty.parquet`` with its columns (and
``system``/``date`` as plain columns), so ``scan_parquet`` and ``dataset`` still read it. ``date``
is the trace's own start day (see :func:`orchestrace.store.rows.trace_date`). A table is written
to a temporary folder and renamed into place, so a failed export (disk full) never leaves a
half-written table.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from ..core.errors import OrchestraceError
from ..core.paths import make_dirs
from ..parallel import LOCAL, ensure_ray
from .db import connect, store_error
from .schema import TABLES

UNKNOWN_SYSTEM = "unknown"
EMPTY_FILE = "empty.parquet"  # what an empty table holds (readers fail on a folder with no file)
_ORDER = {
    "traces": "trace_id",
    "summary": "trace_id",
    "events": "trace_id, idx",
    "edges": "trace_id, idx",
    "agents": "trace_id, first_idx",
    "rewards": "trace_id, channel",
    "credits": "trace_id, event_idx, ord",
    "metrics": "trace_id, source, name",
}


def _select(name: str) -> str:
    cols = []
    for c, t in TABLES[name]:
        if name in ("traces", "summary") and c in ("system", "date"):  # partition columns, from traces
            continue
        cols.append(f'x."{c}"::VARCHAR AS "{c}"' if t == "JSON" else f'x."{c}"')
    part = f"coalesce(t.system, '{UNKNOWN_SYSTEM}') AS system, strftime(t.date, '%Y-%m-%d') AS date"
    src = (
        f"{name} x JOIN traces t USING (trace_id)"
        if name != "traces"
        else "traces x JOIN traces t USING (trace_id)"
    )
    order = ", ".join(f"x.{c.strip()}" for c in _ORDER[name].split(","))
    return f"SELECT {', '.join(cols)}, {part} FROM {src} ORDER BY {order}"


def export_parquet(
    store: str,
    out: str,
    *,
    tables: list[str] | None = None,
    overwrite: bool = False,
    compression: str = "zstd",
) -> dict[str, int]:
    """Write the store's tables under ``out/<table>/system=.../date=.../*.parquet``; rows per table."""
    import duckdb

    names = tables or list(TABLES)
    bad = [n for n in names if n not in TABLES]
    if bad:
        raise OrchestraceError("OT010", f"unknown table {bad[0]!r}; tables: {', '.join(TABLES)}")
    if compression not in ("zstd", "snappy", "gzip", "uncompressed"):
        raise OrchestraceError(
            "OT010", f"compression must be zstd, snappy, gzip or uncompressed, got {compression!r}"
        )
    if os.path.exists(out) and not os.path.isdir(out):  # os.makedirs failed on it (exit 3)
        raise OrchestraceError("OT011", "is a file: parquet writes a folder of tables (-o FOLDER)", path=out)
    for n in names:
        if os.path.exists(os.path.join(out, n)) and not overwrite:
            raise OrchestraceError("OT011", f"{n}/ exists already (use --overwrite to replace it)", path=out)
    con = connect(store, read_only=True)  # first: a store that is none left an empty -o folder
    try:
        make_dirs(out)
    except OrchestraceError:
        con.close()
        raise
    if tables is None:  # an orchestrace-store/1 file has no summary
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        names = [n for n in names if n in present]
    counts: dict[str, int] = {}
    tmp = tempfile.mkdtemp(prefix=".export-", dir=out)
    try:
        for n in names:
            dest = os.path.join(tmp, n)
            rows = con.execute(
                f"COPY ({_select(n)}) TO '{_sql_str(dest)}' "
                f"(FORMAT parquet, PARTITION_BY (system, date), COMPRESSION {compression}, OVERWRITE_OR_IGNORE)"
            ).fetchall()
            counts[n] = int(rows[0][0]) if rows else 0
            if counts[n] == 0:  # still a readable table: one Parquet file with the columns, no rows
                os.makedirs(dest, exist_ok=True)
                empty = os.path.join(dest, EMPTY_FILE)
                con.execute(
                    f"COPY ({_select(n)} LIMIT 0) TO '{_sql_str(empty)}' (FORMAT parquet, COMPRESSION {compression})"
                )
        for n in names:
            final = os.path.join(out, n)
            if os.path.exists(final):
                shutil.rmtree(final)
            os.replace(os.path.join(tmp, n), final)
    except (duckdb.Error, OSError) as e:
        raise store_error(e, out) from None
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return counts


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


# ---------------------------------------------------------------- Ray Data over Parquet


def read_parquet(folder: str, table: str = "events", *, ray: str = LOCAL) -> Any:
    """A Ray Dataset over one exported table (hive partitions ``system=``/``date=`` become columns)."""
    import ray.data

    ensure_ray(ray)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    path = os.path.join(folder, table)
    if not os.path.isdir(path):
        raise OrchestraceError(
            "OT001", f"no exported table {table!r} here (run `orchestrace parquet`)", path=folder
        )
    return ray.data.read_parquet(path)


def agent_cost_ray(folder: str, *, ray: str = LOCAL) -> dict[str, dict[str, float]]:
    """Per-agent events, tokens and USD over an exported Parquet folder, computed with Ray Data.

    Each block is aggregated where it is read (no shuffle); the small per-block tables are
    summed here, so the cost is one pass over the data whatever the number of blocks.
    """
    ds = read_parquet(folder, "events", ray=ray).select_columns(
        ["agent", "tokens_in", "tokens_out", "cost_usd"]
    )
    parts = ds.map_batches(_partial_agent_cost, batch_format="pyarrow").take_all()
    out: dict[str, dict[str, float]] = {}
    for r in parts:
        acc = out.setdefault(r["agent"], {"events": 0, "tokens": 0, "usd": 0.0})
        acc["events"] += int(r["events"])
        acc["tokens"] += int(r["tokens"])
        acc["usd"] += float(r["usd"])
    return dict(sorted(out.items()))


def _partial_agent_cost(batch: Any) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    tokens = pc.add(pc.fill_null(batch["tokens_in"], 0), pc.fill_null(batch["tokens_out"], 0))
    t = pa.table({"agent": batch["agent"], "tokens": tokens, "usd": pc.fill_null(batch["cost_usd"], 0.0)})
    g = t.group_by("agent").aggregate([("agent", "count"), ("tokens", "sum"), ("usd", "sum")])
    return g.rename_columns({"agent_count": "events", "tokens_sum": "tokens", "usd_sum": "usd"})
