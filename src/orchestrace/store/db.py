"""Opening a store, transactional ingest, SQL queries, and reading traces back out.

Ingest runs in ONE DuckDB transaction per call: DuckDB writes its log only at commit, so a
process killed before the commit leaves the file as it was, and one killed after it leaves it
fully updated. A trace whose content digest is already stored under its id is skipped, so
re-ingesting the same files changes nothing; a changed trace replaces the stored one. A trace
met twice in one input with the same content (a recording and its replay) is stored once and
counted as a duplicate; with different content the later one is refused (OT310).

Files are read, validated and turned into columns by this process and worker processes (one
file, or piece of a large JSONL file, per task; ``parallel.parallel_imap``) when there are
enough bytes to pay for the workers; this process alone writes, piece by piece in input order,
so the tables and the report do not depend on the number of workers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec
import numpy as np
import orjson

from ..core.errors import Finding, OrchestraceError
from ..core.model import Trace, trace_from_dict
from ..core.read import Piece, split_file
from ..parallel import file_processes, parallel_imap, parallel_map
from .rows import (
    EVENT_COLUMN_TO_FIELD,
    Chunk,
    Failure,
    Known,
    column,
    is_unchanged,
    iter_chunks,
    prepare_file,
)
from .schema import (
    READABLE_VERSIONS,
    ROW_EXTRA,
    ROW_TABLES,
    STORE_VERSION,
    TABLES,
    agents_sql,
    ddl,
    summary_sql,
)

# pyarrow is imported where it is used: a command reading trace files through traces_of
# (analyze, credit, ...) does not pay the 70 ms of importing it
if TYPE_CHECKING:
    import pyarrow as pa

R = TypeVar("R")

OnError = Literal["report", "skip", "abort"]
ON_ERROR: tuple[str, ...] = ("report", "skip", "abort")
#: with ``workers=None``, an input smaller than this is prepared in this process: a worker
#: cost 10-80 ms more CPU at 2-4 MB (fork, pickling its columns back) and saved no time
#: measurable at 2-15 MB here (docs/performance.md)
PARALLEL_MIN_BYTES = 8_000_000
#: rows of consecutive chunks are inserted together up to this many events: each insert costs
#: 1-6 ms a table (4 MB pieces made 16 inserts where whole files made 4: +0.25 s on 64 MB), and
#: DuckDB writes each full row group (122,880 rows) of one insert to the file during the insert,
#: while the workers still work, instead of at the commit (64 MB: commit 0.15 s, 0.24-0.32 s
#: with inserts of 100,000 events)
INSERT_EVENTS = 122_880
#: with workers, a JSONL file past this size is prepared in pieces of about this size (cut at
#: lines), so that processes finish together: with whole 16 MB files one process sat idle for
#: the last third of the ingest (docs/performance.md)
PIECE_BYTES = 4_000_000
_LOCK_PID = re.compile(r"\(PID (\d+)\)")


class StoreError(OrchestraceError):
    """The store file cannot be used (corrupt, locked, full, wrong version)."""


class IngestAborted(OrchestraceError):
    """``on_error="abort"`` met an invalid trace; the transaction was rolled back."""

    exit_code = 1


class IngestReport(msgspec.Struct, kw_only=True):
    files: int = 0
    inserted: int = 0
    replaced: int = 0
    unchanged: int = 0
    duplicates: int = 0  # same id and content as a trace earlier in the input (a replay): stored once
    events: int = 0
    seconds: float = 0.0
    failures: list[Failure] = msgspec.field(default_factory=list)

    @property
    def failed(self) -> int:
        return len(self.failures)


def store_error(e: BaseException, path: str) -> OrchestraceError:
    """A DuckDB/OS error on the store file as a one-line user error with a stable code."""
    msg = str(e)
    low = msg.lower()
    if "not a valid duckdb database" in low or "corrupt" in low or "checksum" in low:
        return StoreError(
            "OT301", "not a DuckDB store, or the file is corrupt (restore it or remove it)", path=path
        )
    if "could not set lock" in low or "conflicting lock" in low:
        pid = _LOCK_PID.search(msg)
        who = f"process {pid.group(1)}" if pid else "another process"
        return StoreError("OT302", f"store is locked by {who}; wait for it to finish or stop it", path=path)
    if (
        "no space left" in low
        or "file too large" in low
        or getattr(e, "errno", None) in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
    ):
        return StoreError(
            "OT303", "disk full (or file size limit) while writing; the store is unchanged", path=path
        )
    if isinstance(e, FileNotFoundError) or "no such file" in low:
        return StoreError("OT300", "store file or its folder does not exist", path=path)
    return StoreError("OT300", f"store error: {msg.splitlines()[0] if msg else type(e).__name__}", path=path)


def connect(path: str, *, read_only: bool = False) -> Any:
    """An open DuckDB connection to an orchestrace store; creates the tables when writable."""
    import duckdb

    p = os.fspath(path)
    if read_only and not os.path.exists(p):
        raise StoreError("OT300", "no store here (run `orchestrace ingest ... --store` first)", path=p)
    if _other_file(p):  # DuckDB's own error for it was "Cannot launch in-memory database in read-only mode"
        raise StoreError("OT301", "not a DuckDB store (a store is a .duckdb file ingest wrote)", path=p)
    try:
        con = duckdb.connect(p, read_only=read_only)
    except (duckdb.Error, OSError) as e:
        raise store_error(e, p) from None
    try:
        _check_version(con, p, create=not read_only)
    except BaseException:
        con.close()
        raise
    return con


def _other_file(path: str) -> bool:
    """A file that exists, holds data and is not a DuckDB database (its header says ``DUCK``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
    except OSError:  # missing or unreadable: DuckDB says which
        return False
    return len(head) > 0 and head[8:12] != b"DUCK"


def _check_version(con: Any, path: str, *, create: bool) -> None:
    import duckdb

    tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    if "store_info" not in tables:
        if tables or not create:
            raise StoreError(
                "OT304", "a DuckDB file, but not an orchestrace store (no store_info table)", path=path
            )
        try:
            con.execute("BEGIN TRANSACTION")
            for stmt in ddl():
                con.execute(stmt)
            con.execute("INSERT INTO store_info VALUES ('version', ?)", [STORE_VERSION])
            con.execute("COMMIT")
        except duckdb.Error as e:
            con.execute("ROLLBACK")
            raise store_error(e, path) from None
        return
    rows = con.execute("SELECT value FROM store_info WHERE key = 'version'").fetchall()
    version = rows[0][0] if rows else None
    if version not in READABLE_VERSIONS:
        raise StoreError(
            "OT304",
            f"store version {version!r}, this orchestrace reads {' and '.join(map(repr, READABLE_VERSIONS))}",
            path=path,
        )
    if version != STORE_VERSION and create:
        _upgrade(con, path, version)


def store_version(con: Any) -> str:
    """The format version of the store open on ``con`` (checked by ``connect``)."""
    return str(con.execute("SELECT value FROM store_info WHERE key = 'version'").fetchall()[0][0])


def _upgrade(con: Any, path: str, version: str) -> None:
    """An older store to ``STORE_VERSION``, in one transaction (an ingest opens the store
    writable, so any ingest upgrades it): /1 gets the ``summary`` table, filled from the stored
    tables; /1 and /2 get measure's ``agents.busy_s`` (``_recompute_busy``)."""
    import duckdb

    try:
        con.execute("BEGIN TRANSACTION")
        for stmt in ddl():
            con.execute(stmt)
        if version == "orchestrace-store/1":
            con.execute(summary_sql("traces", "events", "metrics", "rewards", ordered=False))
        _recompute_busy(con)
        con.execute("UPDATE store_info SET value = ? WHERE key = 'version'", [STORE_VERSION])
        con.execute("COMMIT")
    except duckdb.Error as e:
        _rollback(con)
        raise store_error(e, path) from None


#: traces read back and measured at once by ``_recompute_busy``
_UPGRADE_BATCH = 500


def _recompute_busy(con: Any) -> None:
    """``agents.busy_s`` as ingest now stores it, from the stored traces: the sum of measure's
    per-event busy time (``TraceView.busy_time``) for a measured trace, NULL for one ingested
    without measure (as its ``critical`` flags)."""
    from ..measure import TraceView

    con.execute("UPDATE agents SET busy_s = NULL")
    ids = [
        r[0] for r in con.execute("SELECT trace_id FROM traces WHERE measured ORDER BY trace_id").fetchall()
    ]
    for at in range(0, len(ids), _UPGRADE_BATCH):
        tids: list[str] = []
        agents: list[str] = []
        busy: list[float] = []
        for tr in read_traces(con, ids[at : at + _UPGRADE_BATCH]):
            tids.extend([tr.trace_id] * len(tr.events))
            agents.extend(e.agent for e in tr.events)
            busy.extend(TraceView(tr).busy_time.tolist())
        con.register(
            "_busy", {"trace_id": column(tids), "agent": column(agents), "busy": column(busy, "DOUBLE")}
        )
        con.execute(
            "UPDATE agents SET busy_s = b.busy FROM (SELECT trace_id, agent, sum(busy) AS busy FROM _busy "
            "GROUP BY ALL) b WHERE agents.trace_id = b.trace_id AND agents.agent = b.agent"
        )
        con.unregister("_busy")


# ---------------------------------------------------------------- ingest


def ingest(
    store: str,
    paths: Iterable[str],
    *,
    on_error: OnError = "report",
    measure: bool = True,
    ray: str | None = None,
    workers: int | None = None,
    chunk_events: int = 200_000,
    progress: Callable[[IngestReport], None] | None = None,
) -> IngestReport:
    """Load trace files into the store in one transaction (see module docstring).

    ``on_error``: ``report`` and ``skip`` leave out invalid traces and commit the rest (the
    caller reports ``failures``); ``abort`` rolls everything back at the first invalid trace.
    ``workers``: processes preparing files (parse, validate, digest, columns), this one
    included, which alone writes; None: ``ingest_processes``; 1: everything in this process.
    ``ray``: prepare files as Ray tasks at this address ("local" for a local cluster) instead.
    Either way the store is written by this process only.
    """
    import duckdb

    if on_error not in ON_ERROR:
        raise OrchestraceError("OT010", f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
    if workers is not None and workers < 1:
        raise OrchestraceError("OT010", f"workers must be at least 1, got {workers}")
    if workers is not None and ray is not None:
        raise OrchestraceError("OT010", "give workers (processes here) or ray (Ray tasks), not both")
    files = list(paths)
    report = IngestReport(files=len(files))
    start = time.perf_counter()
    created = not os.path.exists(store)
    con = connect(store)
    try:
        stored: Known = {
            r[0]: (r[1], bool(r[2]))
            for r in con.execute("SELECT trace_id, digest, measured FROM traces").fetchall()
        }
        seen: dict[str, tuple[str, str]] = {}
        con.execute("BEGIN TRANSACTION")
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
        processes = ingest_processes(files, workers)
        prepared = _chunks(
            files,
            measure=measure,
            ray=ray,
            processes=processes,
            chunk_events=chunk_events,
            known=stored,
            now=now,
        )
        pending: list[dict[str, dict[str, np.ndarray]]] = []
        with contextlib.closing(prepared):  # on an error, stop the workers now, not when collected
            for chunk in prepared:
                for f in chunk.failures:
                    _fail(report, f, on_error)
                rows = _admit(con, chunk, stored, seen, report, on_error, measure)
                if rows is not None:
                    pending.append(rows)
                if sum(len(t["events"]["trace_id"]) for t in pending) >= INSERT_EVENTS:
                    _insert(con, pending)
                    pending = []
                if progress:
                    progress(report)
        _insert(con, pending)
        con.execute("COMMIT")
    except (duckdb.Error, OSError) as e:
        _rollback(con)
        con.close()
        if created:
            _remove_store(store)
        raise store_error(e, store) from None
    except BaseException:
        _rollback(con)
        con.close()
        if created:  # an aborted ingest into a new store leaves no store behind
            _remove_store(store)
        raise
    try:
        con.execute("CHECKPOINT")
    except (duckdb.Error, OSError) as e:
        raise StoreError(
            "OT305",
            f"ingest committed, but moving it from the write-ahead log into the store failed ({str(e).splitlines()[0]}); "
            "the data is safe in the .wal file and is applied the next time the store is opened with free space",
            path=store,
        ) from None
    finally:
        con.close()
    if created and report.failures and not (report.inserted or report.unchanged or report.duplicates):
        _remove_store(store)  # every input failed (a typo in its name): no empty store is left behind
    report.seconds = time.perf_counter() - start
    return report


def _remove_store(store: str) -> None:
    for p in (store, store + ".wal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(p)


def _rollback(con: Any) -> None:
    try:
        con.execute("ROLLBACK")
    except Exception:  # noqa: BLE001 - no transaction open, or the connection is gone
        pass


def _fail(report: IngestReport, f: Failure, on_error: str) -> None:
    if on_error == "abort":
        first = f.first()
        who = f" (trace {f.trace_id})" if f.trace_id else ""
        raise IngestAborted(
            first.code,
            f"{first.message}{who}; ingest aborted, nothing was written",
            path=f.path,
            line=f.line or first.line,
            pointer=first.pointer,
        )
    report.failures.append(f)


def ingest_processes(files: Sequence[str], workers: int | None, load: float | None = None) -> int:
    """How many processes prepare ``files``: ``parallel.file_processes`` with ingest's sizes."""
    return file_processes(files, workers, PARALLEL_MIN_BYTES, PIECE_BYTES, load)


def _chunks(
    files: list[str],
    *,
    measure: bool,
    ray: str | None,
    processes: int,
    chunk_events: int,
    known: Known,
    now: dt.datetime,
) -> Iterator[Chunk]:
    """Prepared rows, file by file in input order. In this process ``known`` is read live (a
    trace repeated in the input is seen as stored); worker processes and Ray tasks get a
    snapshot of it taken before the first write (a repeat is then prepared again and the
    writer, which sees every id in order, counts it the same way)."""
    if ray is None and processes == 1:
        for p in files:
            yield from iter_chunks(p, measure=measure, chunk_events=chunk_events, known=known, now=now)
        return
    args = (measure, chunk_events, known if ray is None else dict(known), now)
    pieces: list[Piece] = [p for f in files for p in split_file(f, PIECE_BYTES)]
    for chunks in parallel_imap(prepare_file, pieces, ray=ray, processes=processes, args=args):
        yield from chunks


def _conflict(report: IngestReport, path: str, tid: str, first: str, on_error: str) -> None:
    where = "earlier in this file" if first == path else f"first in {first}"
    msg = f"trace id {tid!r} appears twice in the input with different content ({where})"
    _fail(report, Failure(path, None, tid, [Finding(code="OT310", severity="error", message=msg)]), on_error)


def _admit(
    con: Any,
    chunk: Chunk,
    stored: Known,
    seen: dict[str, tuple[str, str]],
    report: IngestReport,
    on_error: str,
    measure: bool,
) -> dict[str, dict[str, np.ndarray]] | None:
    """Count the chunk's traces in the report, delete the stored traces it replaces, and return
    the rows to insert (None: none). ``seen``: trace id -> (digest, file) of its first occurrence."""
    for tid, dig in chunk.unchanged:
        if tid not in seen:
            seen[tid] = (dig, chunk.path)
            report.unchanged += 1
        elif seen[tid][0] != dig:
            _conflict(report, chunk.path, tid, seen[tid][1], on_error)
        else:
            report.duplicates += 1
    traces = chunk.tables["traces"]
    keep: list[str] = []
    replace: list[str] = []
    measured: dict[str, bool] = {}
    cols = (traces[c].tolist() for c in ("trace_id", "digest", "measured"))
    for tid, dig, was_measured in zip(*cols, strict=True):
        if tid in seen:
            if seen[tid][0] != dig:
                _conflict(report, chunk.path, tid, seen[tid][1], on_error)
            else:
                report.duplicates += 1
            continue
        seen[tid] = (dig, chunk.path)
        if is_unchanged(stored, tid, dig, measure):
            report.unchanged += 1
            continue
        keep.append(tid)
        measured[tid] = was_measured
        if tid in stored:
            replace.append(tid)
    if not keep:
        return None
    tables = chunk.tables
    if len(keep) < len(traces["trace_id"]):
        kept = set(keep)
        tables = {}
        for name, t in chunk.tables.items():
            ids = t["trace_id"]
            rows = np.fromiter(map(kept.__contains__, ids), dtype=bool, count=len(ids))
            tables[name] = {c: v[rows] for c, v in t.items()}
    # no try/finally around the views: after a failed statement DuckDB refuses even an
    # unregister, which would hide the real error; the rollback and close drop them anyway
    if replace:
        con.register("_replace", {"trace_id": column(replace)})
        for name in TABLES:
            con.execute(f"DELETE FROM {name} WHERE trace_id IN (SELECT trace_id FROM _replace)")
        con.unregister("_replace")
    for tid in keep:
        stored[tid] = (seen[tid][0], measured[tid])
    report.inserted += len(keep) - len(replace)
    report.replaced += len(replace)
    report.events += len(tables["events"]["trace_id"])
    return tables


def _insert(con: Any, pending: list[dict[str, dict[str, np.ndarray]]]) -> None:
    """Insert the rows of consecutive chunks, in order, one statement per table."""
    if not pending:
        return
    # no try/finally around the views: see _admit. The derived tables read these rows only: a
    # large store is not scanned per insert
    for name in ROW_TABLES:
        rows = {c: _concat([t[name][c] for t in pending]) for c in pending[0][name]}
        view = f"_rows_{name}"
        con.register(view, {**rows, "_pos": np.arange(len(rows["trace_id"]))})
        extra = "".join(f", {c}" for c, _ in ROW_EXTRA.get(name, ()))
        con.execute(f"INSERT INTO {name} SELECT * EXCLUDE (_pos{extra}) FROM {view}")
        if name == "events":
            con.execute(agents_sql(view))
    con.execute(summary_sql("_rows_traces", "_rows_events", "_rows_metrics", "_rows_rewards", ordered=True))
    for name in ROW_TABLES:
        con.unregister(f"_rows_{name}")


def _concat(cols: list[np.ndarray]) -> np.ndarray:
    """One column of several chunks; an integer column with a None is a masked array (``column``)."""
    if len(cols) == 1:
        return cols[0]
    if any(isinstance(c, np.ma.MaskedArray) for c in cols):
        return np.ma.concatenate(cols)
    return np.concatenate(cols)


# ---------------------------------------------------------------- query and read back


def query(store: str, sql: str, params: list[Any] | None = None) -> pa.Table:
    """Run read-only SQL against the store; the result as an Arrow table."""
    import duckdb

    con = connect(store, read_only=True)
    try:
        relation = con.sql(sql, params=params or None)
        if relation is None:  # empty SQL, ";", a statement that returns nothing (was exit 3)
            raise OrchestraceError("OT320", "query failed: the SQL returns no rows (write a SELECT)")
        return relation.to_arrow_table()
    except duckdb.Error as e:
        first = str(e).splitlines()[0]
        if isinstance(e, duckdb.IOException):
            raise store_error(e, store) from None
        raise OrchestraceError("OT320", f"query failed: {first}") from None
    finally:
        con.close()


def query_rows(table: pa.Table) -> list[dict[str, Any]]:
    """A query result's rows as Python values. A date or time outside Python's range (DuckDB's
    ``infinity``, year 294247, 5000 BC) made pyarrow raise OverflowError, and ``query`` exit 3;
    such a column is converted by DuckDB instead, which gives infinity as the largest datetime
    and the others as their text."""
    import duckdb

    columns = []
    for i in range(table.num_columns):
        try:
            columns.append(table.column(i).to_pylist())
        except (OverflowError, ValueError):
            con = duckdb.connect()
            try:
                columns.append([row[0] for row in con.from_arrow(table.select([i])).fetchall()])
            finally:
                con.close()
    names = table.column_names
    return [dict(zip(names, values, strict=True)) for values in zip(*columns, strict=True)]


def trace_ids(store: str, where: str | None = None) -> list[str]:
    """Stored trace ids (sorted), optionally filtered by a SQL condition on ``traces``."""
    sql = "SELECT trace_id FROM traces" + (f" WHERE {where}" if where else "") + " ORDER BY trace_id"
    return query(store, sql)["trace_id"].to_pylist()


def iter_store_traces(
    store: str, *, where: str | None = None, ids: list[str] | None = None, batch: int = 256
) -> Iterator[Trace]:
    """Traces read back from the store, sorted by trace id; each equals the trace ingested."""
    import duckdb

    con = connect(store, read_only=True)
    try:
        if ids is None:
            sql = "SELECT trace_id FROM traces" + (f" WHERE {where}" if where else "") + " ORDER BY trace_id"
            try:
                ids = [r[0] for r in con.execute(sql).fetchall()]
            except duckdb.Error as e:
                raise OrchestraceError("OT320", f"bad --where condition: {str(e).splitlines()[0]}") from None
        for i in range(0, len(ids), batch):
            yield from _read_batch(con, ids[i : i + batch])
    finally:
        con.close()


def is_store_path(path: str) -> bool:
    """A DuckDB store file (by extension), as opposed to a trace file."""
    return os.fspath(path).lower().endswith((".duckdb", ".db"))


def traces_of(path: str, *, where: str | None = None) -> Iterator[Trace]:
    """Traces of a store or of a trace file, so any command can take either."""
    from ..core.io import iter_traces

    if is_store_path(path):
        yield from iter_store_traces(path, where=where)
    else:
        yield from iter_traces(path)


def read_traces(con: Any, ids: list[str]) -> list[Trace]:
    """The traces with these ids, read through an open connection (the trace browser's, which
    holds one for its lifetime); ids not stored are left out."""
    return list(_read_batch(con, ids))


def _grouped(con: Any, sql: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in con.sql(sql).to_arrow_table().to_pylist():
        out.setdefault(row["trace_id"], []).append(row)
    return out


def _read_batch(con: Any, ids: list[str]) -> Iterator[Trace]:
    import pyarrow as pa

    con.register("_want", pa.table({"trace_id": pa.array(ids, pa.string())}))
    try:
        where = "WHERE trace_id IN (SELECT trace_id FROM _want)"
        headers = dict(con.execute(f"SELECT trace_id, header FROM traces {where}").fetchall())
        events = _grouped(con, f"SELECT * FROM events {where} ORDER BY trace_id, idx")
        edges = _grouped(con, f"SELECT trace_id, src, dst, type FROM edges {where} ORDER BY trace_id, idx")
        credits = _grouped(con, f"SELECT * FROM credits {where} ORDER BY trace_id, event_idx, ord")
    finally:
        con.unregister("_want")
    for tid in ids:
        if tid not in headers:
            continue
        d = orjson.loads(headers[tid])
        d["trace_id"] = tid
        credit: dict[int, dict[str, float]] = {}
        for c in credits.get(tid, ()):
            credit.setdefault(c["event_idx"], {})[c["channel"]] = c["value"]
        d["events"] = [_event(row, credit.get(row["idx"])) for row in events.get(tid, ())]
        d["edges"] = [{"src": x["src"], "dst": x["dst"], "type": x["type"]} for x in edges.get(tid, ())]
        yield trace_from_dict(d)


def _event(row: dict[str, Any], credit: dict[str, float] | None) -> dict[str, Any]:
    e = {f: row[c] for c, f in EVENT_COLUMN_TO_FIELD.items() if row[c] is not None}
    if row["attrs"] is not None:
        e["attrs"] = orjson.loads(row["attrs"])
    if credit:
        e["credit"] = credit
    if row["extra"] is not None:
        for k, v in orjson.loads(row["extra"]).items():
            e.setdefault(k, v)
    return e


def stats(store: str) -> dict[str, int]:
    """Row count of every table."""
    con = connect(store, read_only=True)
    try:
        present = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        return {
            name: con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0]
            for name in TABLES
            if name in present  # an orchestrace-store/1 file has no summary
        }
    finally:
        con.close()


def map_traces(
    fn: Callable[..., R],
    source: str | Sequence[str],
    *,
    ray: str | None = None,
    seed: int | None = None,
    where: str | None = None,
    batch: int = 16,
) -> list[R]:
    """``fn(trace[, seed])`` over every trace of a store (path ending .duckdb) or of trace files.

    Traces are read here and shipped to the tasks, so workers on other machines need no
    access to the files; results come in store order (trace id) or file order.
    """
    paths = [source] if isinstance(source, str) else list(source)
    traces = [tr for p in paths for tr in traces_of(p, where=where)]
    return parallel_map(fn, traces, ray=ray, seed=seed, batch=batch)
