"""Store commands: ingest (trace files -> DuckDB), query (SQL -> table), parquet (export)."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import math
import os
import sys
from typing import Annotated, Any

import orjson
import typer
from rich.markup import escape
from rich.table import Table

from ..core.errors import OrchestraceError
from .inputs import expand_paths, foreign_log
from .output import console, console_err
from .ray_option import RayCommand, RayOption

StoreOption = Annotated[str, typer.Option("--store", "-s", help="The DuckDB store file (created by ingest).")]
_FORMATS = ("table", "json", "csv")


_ON_ERROR = ("report", "skip", "abort")


def _failure_line(f: Any) -> str:
    first = f.first()
    where = f.path + (f":{f.line or first.line}" if (f.line or first.line) else "")
    who = f" trace {f.trace_id}" if f.trace_id else ""
    ptr = f" {first.pointer}" if first.pointer else ""
    more = f" (+{len(f.findings) - 1} more)" if len(f.findings) > 1 else ""
    return f"{where}{who}{ptr}: {first.code} {first.message}{more}"


def ingest_cmd(
    paths: Annotated[list[str], typer.Argument(help="Trace files, directories or globs.")],
    store: StoreOption = "traces.duckdb",
    on_error: Annotated[
        str,
        typer.Option(
            "--on-error",
            help="Invalid trace: report (list, skip, exit 1), skip (exit 0) or abort (write nothing).",
        ),
    ] = "report",
    measure: Annotated[
        bool,
        typer.Option(
            "--measure/--no-measure", help="Compute orchestrace.measure metrics into the metrics table."
        ),
    ] = True,
    ray: RayOption = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Processes preparing files (read, validate, columns), this one included; it alone "
            "writes. Default: one per CPU other jobs leave free (1-minute load average), for two or more "
            "files of 8 MB in all. 1: no other process; at most 4 per CPU.",
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary line.")] = False,
) -> None:
    """Load traces into a DuckDB store, in one transaction, idempotent by trace id.

    A trace already stored with the same content is left alone; a changed one replaces it. A process killed mid-ingest leaves the store as it was. Tables: traces, events, edges, agents, rewards, credits, metrics, summary (docs/store.md).

    Examples:\n
      orchestrace ingest runs/ --store traces.duckdb\n
      orchestrace ingest a.jsonl b.events.jsonl.zst -s traces.duckdb --on-error abort\n
      orchestrace ingest corpus/ -s traces.duckdb --workers 1      # all in this process\n
      orchestrace ingest corpus/ -s traces.duckdb --ray            # prepare files as Ray tasks\n
      orchestrace ingest corpus/ -s traces.duckdb --ray auto       # on a running Ray cluster
    """
    from ..store.db import ingest

    if on_error not in _ON_ERROR:
        raise OrchestraceError("OT010", f"--on-error must be one of {', '.join(_ON_ERROR)}, got {on_error!r}")
    files = list(expand_paths(paths))
    report = ingest(store, files, on_error=on_error, measure=measure, ray=ray, workers=workers)  # type: ignore[arg-type]
    if on_error == "report":
        foreign = {p: foreign_log(p) for p in {f.path for f in report.failures}}
        told: set[str] = set()  # a foreign agent log: one line for the file, not one per record
        for f in report.failures:
            if (hint := foreign[f.path]) is None:
                line = _failure_line(f)
            elif f.path in told:
                continue
            else:
                told.add(f.path)
                line = f"{f.path}: {hint}"
            console_err.print(f"[red]invalid[/red] {escape(line)}", highlight=False, soft_wrap=True)
    if not quiet:
        failed = (
            f", {report.failed} invalid {'skipped' if on_error == 'skip' else 'not ingested'}"
            if report.failed
            else ""
        )
        dups = (
            f", {report.duplicates} duplicate(s) of a trace earlier in the input (same id and content) stored once"
            if report.duplicates
            else ""
        )
        console_err.print(
            f"{report.inserted} new, {report.replaced} replaced, {report.unchanged} unchanged trace(s)"
            f"{dups}{failed}; "
            + (
                f"{report.events:,} events written to {store}"
                if os.path.exists(store)
                else "no store written (every input failed)"
            )
            + f" in {report.seconds:.2f} s",
            highlight=False,
        )
    if report.failed and on_error == "report":
        raise typer.Exit(1)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def _jsonable(v: Any) -> Any:
    """A query value as JSON can hold it exactly: a DECIMAL or HUGEINT (Decimal, or an int past
    64 bits) as a number when a float or int64 holds it, else as its decimal text; NaN and
    infinity as null; a blob as hex; an interval or other type as its text. orjson refused the
    Decimal and the big int (an internal error, exit 3)."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int):
        return v if -(2**63) <= v < 2**64 else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        if not v.is_finite():
            return None
        if v == v.to_integral_value():
            return _jsonable(int(v))
        return float(v) if decimal.Decimal(repr(float(v))) == v else str(v)
    if isinstance(v, dt.date | dt.datetime | dt.time):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return str(v)


def query_cmd(
    sql: Annotated[str, typer.Argument(help="A SQL query (DuckDB dialect) over the store's tables.")],
    store: StoreOption = "traces.duckdb",
    format: Annotated[str, typer.Option("--format", "-f", help="table, json or csv")] = "table",
    max_rows: Annotated[int, typer.Option(help="Rows shown in table format (json/csv print all).")] = 100,
) -> None:
    """Run read-only SQL against a store and print the result.

    Tables: traces, events, edges, agents, rewards, credits, metrics, summary (docs/store.md).

    Examples:\n
      orchestrace query "SELECT agent, sum(cost_usd) AS usd FROM events GROUP BY agent ORDER BY usd DESC" -s traces.duckdb\n
      orchestrace query "SELECT t.topology, avg(value) FROM metrics JOIN traces t USING (trace_id) WHERE name = 'critical_path_s' GROUP BY 1"\n
      orchestrace query "SELECT * FROM traces" --format json > traces.json
    """
    from ..store.db import query, query_rows

    if format not in _FORMATS:
        raise OrchestraceError("OT010", f"--format must be one of {', '.join(_FORMATS)}, got {format!r}")
    result = query(store, sql)
    rows = query_rows(result)
    names = result.column_names
    if format == "json":
        out = [{k: _jsonable(v) for k, v in r.items()} for r in rows]
        sys.stdout.buffer.write(
            orjson.dumps(out, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n"
        )
    elif format == "csv":
        w = csv.writer(sys.stdout, lineterminator="\n")
        w.writerow(names)
        for r in rows:
            w.writerow(["" if r[k] is None else r[k] for k in names])
    else:
        table = Table(
            *names,
            caption=f"{len(rows)} row(s)" + (f", first {max_rows} shown" if len(rows) > max_rows else ""),
        )
        for r in rows[:max_rows]:
            table.add_row(*(_cell(r[k]) for k in names))
        console.print(table)


def parquet_cmd(
    store: StoreOption = "traces.duckdb",
    out: Annotated[
        str, typer.Option("--out", "-o", help="Output folder (one subfolder per table).")
    ] = "parquet",
    table: Annotated[
        list[str] | None, typer.Option("--table", "-t", help="Export only these tables (repeatable).")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace tables already exported in --out.")] = False,
    compression: Annotated[str, typer.Option(help="zstd, snappy, gzip or uncompressed")] = "zstd",
) -> None:
    """Export the store as Parquet, hive-partitioned by system and date.

    Layout: OUT/<table>/system=<system>/date=<YYYY-MM-DD>/data_0.parquet. Readable by DuckDB, Polars, pyarrow, Spark and Ray Data without orchestrace.

    Examples:\n
      orchestrace parquet -s traces.duckdb -o lake/\n
      orchestrace parquet -s traces.duckdb -o lake/ -t events -t metrics --overwrite\n
      python -c "import polars as pl; print(pl.scan_parquet('lake/events/**/*.parquet', hive_partitioning=True).collect())"
    """
    from ..store.parquet import export_parquet
    from ..store.schema import TABLES

    counts = export_parquet(
        store, out, tables=table or list(TABLES), overwrite=overwrite, compression=compression
    )
    for name, n in counts.items():
        console_err.print(f"{name}: {n:,} rows -> {os.path.join(out, name, '')}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("ingest", cls=RayCommand)(ingest_cmd)
    app.command("query")(query_cmd)
    app.command("parquet")(parquet_cmd)
