"""What the trace browser reads from a store: the per-trace list with its filters, sort and
distributions, single traces, and the pairs it compares.

The store file is attached read-only to an in-memory DuckDB database that holds views of its
tables, so nothing can write to the file; each request works on its own cursor of that one
connection. The ``summary`` table (one row per trace) is copied into memory at start, with a
lower-case ``search`` text of ids and tool names for the text filter (100,000 traces: about
0.3 s and 30 MB). A store of format orchestrace-store/1 has no ``summary`` table: it is built here
from the stored tables (``notice`` says so; an ingest into the store adds it for good).

Speed (bench/ui_bench.py): the count and the distributions of a filter are computed once and
kept (``Store.cache``; the store cannot change under a read-only attach; the unfiltered ones are
computed at start), so sorting and paging a list costs one query; a page is found by sorting row ids and the sort key only, from
whichever end of the list is nearer.

Every query is a fixed SQL text; values from a request only ever travel as parameters, and a
sort column is looked up in ``COLUMNS``, never spliced from the request.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Literal

from ...core.errors import OrchestraceError
from ...core.model import Trace, trace_to_dict

Kind = Literal["text", "num", "int", "date", "usd"]


@dataclass(frozen=True)
class Column:
    key: str  # column of ``summary``
    label: str
    kind: Kind


#: The list's columns, in order; sorting is by any of them.
COLUMNS: tuple[Column, ...] = (
    Column("trace_id", "trace", "text"),
    Column("system", "system", "text"),
    Column("task_id", "task", "text"),
    Column("date", "start date", "date"),
    Column("status", "status", "text"),
    Column("events", "events", "int"),
    Column("agents", "agents", "int"),
    Column("tokens", "tokens", "int"),
    Column("usd", "USD", "usd"),
    Column("wall_clock_s", "wall clock s", "num"),
    Column("critical_path_s", "critical path s", "num"),
    Column("parallel_speedup", "parallel speedup", "num"),
    Column("critical_steps", "Critical Steps", "int"),
    Column("team_reward", "team reward", "num"),
)
BY_KEY = {c.key: c for c in COLUMNS}
#: Columns drawn as a histogram above the list (the categorical ones as counts).
NUMERIC = tuple(c.key for c in COLUMNS if c.kind in ("int", "num", "usd"))
#: Columns binned for the distributions: the start date (by day) and the numbers.
BINNED = ("date", *NUMERIC)
CATEGORICAL = ("system", "status")
PAGE_SIZE = 50
BINS = 24
CACHED_FILTERS = 256


class BrowseError(OrchestraceError):
    """A request the browser cannot answer: bad parameters (400) or an unknown trace (404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__("OT340" if status == 400 else "OT341", message)
        self.status = status


@dataclass
class Store:
    """One store, attached read-only for the life of the server."""

    path: str
    con: Any
    version: str
    notice: str | None = None  # shown on every list page (an old format, built in memory)
    systems: list[str] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: (WHERE clause, parameters) -> (matching rows, distributions), most recent last
    cache: OrderedDict[tuple[str, tuple[Any, ...]], tuple[int, list[Histogram]]] = field(
        default_factory=OrderedDict
    )
    #: numeric column -> (low, bin width, high) over the whole store: the distributions' axes
    ranges: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    #: the unfiltered list's count and distributions, computed at start (they never change)
    everything: tuple[int, list[Histogram]] = (0, [])

    def cursor(self) -> Any:
        with self.lock:  # DuckDB's cursor() on one connection from several threads
            return self.con.cursor()

    def cached(self, key: tuple[str, tuple[Any, ...]]) -> tuple[int, list[Histogram]] | None:
        with self.lock:
            got = self.cache.get(key)
            if got is not None:
                self.cache.move_to_end(key)
            return got

    def keep(self, key: tuple[str, tuple[Any, ...]], value: tuple[int, list[Histogram]]) -> None:
        with self.lock:
            self.cache[key] = value
            while len(self.cache) > CACHED_FILTERS:
                self.cache.popitem(last=False)


def open_store(path: str) -> Store:
    """Attach ``path`` read-only; refuse a missing file, another kind of file or an unknown
    format with the store's own errors (OT300, OT301, OT304)."""
    import duckdb

    from ...store.db import connect, store_version
    from ...store.schema import STORE_VERSION, TABLES, summary_sql

    check = connect(path, read_only=True)  # the store's checks and messages
    try:
        version = store_version(check)
        present = {r[0] for r in check.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        check.close()
    con = duckdb.connect(":memory:")
    literal = os.path.abspath(path).replace("'", "''")  # a path given on the command line
    con.execute(f"ATTACH '{literal}' AS st (READ_ONLY)")
    for name in TABLES:
        if name in present and name != "summary":
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM st.{name}")
    cols = ", ".join(f'"{c}" {t}' for c, t in TABLES["summary"])
    con.execute(f"CREATE TABLE summary ({cols})")
    notice = None
    if "summary" in present:
        con.execute("INSERT INTO summary SELECT * FROM st.summary")
    else:
        start = time.perf_counter()
        con.execute(summary_sql("traces", "events", "metrics", "rewards", ordered=False))
        notice = (
            f"this store is format {version} (before {STORE_VERSION}): its per-trace table was built in "
            f"memory in {time.perf_counter() - start:.1f} s; an ingest into it stores the table "
            "(orchestrace ingest FILES -s STORE upgrades the store)"
        )
    con.execute("ALTER TABLE summary ADD COLUMN search VARCHAR")
    con.execute("UPDATE summary SET search = lower(concat_ws(' ', trace_id, task_id, tools))")
    store = Store(os.path.abspath(path), con, version, notice)
    store.systems = [r[0] for r in con.execute("SELECT DISTINCT system FROM summary ORDER BY 1").fetchall()]
    store.statuses = [r[0] for r in con.execute("SELECT DISTINCT status FROM summary ORDER BY 1").fetchall()]
    for k in BINNED:
        v = _value(k)
        fin = f"isfinite({v})"
        lo, hi = con.execute(
            f"SELECT min({v}) FILTER ({fin}), max({v}) FILTER ({fin}) FROM summary"
        ).fetchall()[0]
        if lo is not None:
            width = hi / BINS - lo / BINS  # finite even for -1e308 .. 1e308, where hi - lo is not
            store.ranges[k] = (lo, width if width > 0 else 1.0, hi)
    cur = con.cursor()
    try:
        store.everything = _distributions(store, cur, "", [])
    finally:
        cur.close()
    return store


# ---------------------------------------------------------------- the list


@dataclass(frozen=True)
class Query:
    """A parsed list request: filters, sort, page. Built only by ``parse_query``."""

    system: str | None = None
    status: str | None = None
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    reward_min: float | None = None
    reward_max: float | None = None
    text: str | None = None
    sort: str = "date"
    desc: bool = True
    page: int = 1

    def params(self, **change: Any) -> dict[str, str]:
        """The query string of this request with ``change`` applied (for links)."""
        values = {**self.__dict__, **change}
        out: dict[str, str] = {}
        for k, v in values.items():
            if v is None or (k, v) in (("sort", "date"), ("desc", True), ("page", 1)):
                continue
            out[k] = ("1" if v else "0") if isinstance(v, bool) else str(v)
        return out


LIST_KEYS = (
    "system",
    "status",
    "date_from",
    "date_to",
    "reward_min",
    "reward_max",
    "text",
    "sort",
    "desc",
    "page",
)


def parse_query(args: dict[str, list[str]]) -> Query:
    """A list request from its query string; anything malformed is a 400 naming the parameter."""
    unknown = sorted(set(args) - set(LIST_KEYS))
    if unknown:
        raise BrowseError(400, f"unknown parameter {unknown[0]!r}; the list takes {', '.join(LIST_KEYS)}")
    one: dict[str, str] = {}
    for k, vs in args.items():
        if len(vs) > 1:
            raise BrowseError(400, f"parameter {k!r} given {len(vs)} times")
        if vs[0].strip():
            one[k] = vs[0].strip()
    sort = one.get("sort", "date")
    if sort not in BY_KEY:
        raise BrowseError(400, f"sort: no column {sort!r}; columns: {', '.join(BY_KEY)}")
    return Query(
        system=one.get("system"),
        status=one.get("status"),
        date_from=_date(one, "date_from"),
        date_to=_date(one, "date_to"),
        reward_min=_number(one, "reward_min"),
        reward_max=_number(one, "reward_max"),
        text=_text(one.get("text")),
        sort=sort,
        desc=_flag(one, "desc", True),
        page=_page(one),
    )


def _date(one: dict[str, str], key: str) -> dt.date | None:
    if key not in one:
        return None
    try:
        return dt.date.fromisoformat(one[key])
    except ValueError:
        raise BrowseError(400, f"{key}: {one[key]!r} is not a date (YYYY-MM-DD)") from None


def _number(one: dict[str, str], key: str) -> float | None:
    if key not in one:
        return None
    try:
        x = float(one[key])
    except ValueError:
        x = math.nan
    if not math.isfinite(x):
        raise BrowseError(400, f"{key}: {one[key]!r} is not a finite number")
    return x


def _flag(one: dict[str, str], key: str, default: bool) -> bool:
    v = one.get(key)
    if v is None:
        return default
    if v not in ("0", "1"):
        raise BrowseError(400, f"{key}: {v!r}; expected 0 or 1")
    return v == "1"


def _page(one: dict[str, str]) -> int:
    v = one.get("page", "1")
    if not v.isdigit() or not 1 <= int(v) <= 10_000_000:
        raise BrowseError(400, f"page: {v!r}; expected a whole number from 1")
    return int(v)


def _text(v: str | None) -> str | None:
    if v is not None and len(v) > 200:
        raise BrowseError(400, f"text: {len(v)} characters; at most 200")
    return v


def _where(q: Query) -> tuple[str, list[Any]]:
    """The WHERE clause of a list request: fixed fragments, values as parameters."""
    parts: list[str] = []
    params: list[Any] = []
    for frag, value in (
        ("system = ?", q.system),
        ("status = ?", q.status),
        ("date >= ?", q.date_from),
        ("date <= ?", q.date_to),
        ("team_reward >= ?", q.reward_min),
        ("team_reward <= ?", q.reward_max),
    ):
        if value is not None:
            parts.append(frag)
            params.append(value)
    if q.text:
        parts.append("contains(search, ?)")  # a substring, not a pattern: % and _ are characters
        params.append(q.text.lower())
    return (" WHERE " + " AND ".join(parts)) if parts else "", params


@dataclass(frozen=True)
class Histogram:
    key: str
    counts: list[int]  # numeric: per bin; categorical: per label
    labels: list[str]  # categorical labels, or [low, high] of a numeric column
    missing: int  # rows without a value


@dataclass(frozen=True)
class Listing:
    rows: list[dict[str, Any]]
    total: int  # rows matching the filters
    histograms: list[Histogram]
    seconds: float  # time the queries took


def list_traces(store: Store, q: Query, page_size: int = PAGE_SIZE) -> Listing:
    """One page of the filtered, sorted list, with the distributions of the filtered rows."""
    start = time.perf_counter()
    where, params = _where(q)
    key = (where, tuple(params))
    cur = store.cursor()
    try:
        known = store.everything if not where else store.cached(key)
        if known is None:
            known = _distributions(store, cur, where, params)
            store.keep(key, known)
        total, hists = known
        rows = _page_rows(cur, q, where, params, total, page_size)
    finally:
        cur.close()
    return Listing(rows, total, hists, time.perf_counter() - start)


def _page_rows(
    cur: Any, q: Query, where: str, params: list[Any], total: int, size: int
) -> list[dict[str, Any]]:
    """The rows of page ``q.page``: row ids sorted by the key alone (not every column), from
    the nearer end of the list (the last page of 100,000 is the first of the reverse order)."""
    offset = (q.page - 1) * size
    if offset >= total:
        return []
    forward = (q.desc, "LAST", "ASC")  # q.sort is a COLUMNS key, never request text
    order = _order(q.sort, *forward)
    if offset > total // 2:  # the same order backwards: NULLs first, ids descending
        order = _order(q.sort, not q.desc, "FIRST", "DESC")
        size, offset = min(size, total - offset), max(0, total - offset - size)
    cols = ", ".join([*(c.key for c in COLUMNS), "parent_id"])
    res = cur.execute(
        f"SELECT {cols} FROM summary WHERE rowid IN "
        f"(SELECT rowid FROM summary{where} ORDER BY {order} LIMIT ? OFFSET ?) "
        f"ORDER BY {_order(q.sort, *forward)}",
        [*params, size, offset],
    )
    names = [d[0] for d in res.description]
    return [dict(zip(names, r, strict=True)) for r in res.fetchall()]


def _order(col: str, desc: bool, nulls: str, ids: str) -> str:
    return f"{col} {'DESC' if desc else 'ASC'} NULLS {nulls}, trace_id {ids}"


def _distributions(store: Store, cur: Any, where: str, params: list[Any]) -> tuple[int, list[Histogram]]:
    """The number of matching rows and each column's distribution, in ONE pass over the
    filtered rows (GROUPING SETS: one grouped count per column). Numeric columns are binned on
    the whole store's range, so a filtered distribution is drawn on the same axis as the
    unfiltered one (and needs no pass of its own to find its range). Nine grouped queries took
    twice as long, and DuckDB's histogram() over nine columns five times, on 100,000 rows."""
    binned = [k for k in BINNED if k in store.ranges]
    exprs, bin_params = [], []
    for k in binned:
        lo, width, _ = store.ranges[k]
        v = _value(k)
        exprs.append(
            f"CASE WHEN isfinite({v}) THEN least(greatest(floor(({v} - ?) / ?), 0), {BINS - 1})::INTEGER END AS b_{k}"
        )
        bin_params += [lo, width]
    groups = [f"b_{k}" for k in binned] + list(CATEGORICAL)
    sets = ", ".join(f"({g})" for g in groups) + ", ()"
    rows = cur.execute(
        f"SELECT grouping({', '.join(groups)}), {', '.join(groups)}, count(*) "
        f"FROM (SELECT {', '.join([*exprs, *CATEGORICAL])} FROM summary{where}) "
        f"GROUP BY GROUPING SETS ({sets})",
        [*bin_params, *params],
    ).fetchall()
    total = 0
    counts: dict[str, dict[Any, int]] = {g: {} for g in groups}
    for row in rows:
        mask, values, n = row[0], row[1:-1], row[-1]
        grouped = [g for j, g in enumerate(groups) if not (mask >> (len(groups) - 1 - j)) & 1]
        if not grouped:
            total = int(n)
        else:
            g = grouped[0]
            counts[g][values[groups.index(g)]] = int(n)
    out = []
    for k in BINNED:
        if k not in store.ranges:
            out.append(Histogram(k, [], [], total))
            continue
        lo, _, hi = store.ranges[k]
        got = counts[f"b_{k}"]
        out.append(
            Histogram(
                k, [got.get(b, 0) for b in range(BINS)], [_label(k, lo), _label(k, hi)], got.get(None, 0)
            )
        )
    for k in CATEGORICAL:
        top = sorted(counts[k].items(), key=lambda kv: (-kv[1], str(kv[0])))[:8]
        out.append(Histogram(k, [n for _, n in top], [str(v) for v, _ in top], 0))
    return total, out


def _value(key: str) -> str:
    """A binned column as a DOUBLE (a date as days since 1970)."""
    return "(date - DATE '1970-01-01')::DOUBLE" if key == "date" else f"{key}::DOUBLE"


def _label(key: str, x: float) -> str:
    if key == "date":
        return (dt.date(1970, 1, 1) + dt.timedelta(days=int(x))).isoformat()
    return f"{x:.4g}"


# ---------------------------------------------------------------- single traces


def summary_of(store: Store, trace_id: str) -> dict[str, Any]:
    """The list row of one trace (404 if it is not stored)."""
    cur = store.cursor()
    try:
        res = cur.execute("SELECT * FROM summary WHERE trace_id = ?", [trace_id])
        names = [d[0] for d in res.description]
        row = res.fetchone()
    finally:
        cur.close()
    if row is None:
        raise BrowseError(404, f"no trace {trace_id!r} in this store")
    return dict(zip(names, row, strict=True))


def load_trace(store: Store, trace_id: str) -> Trace:
    from ...store.db import read_traces

    cur = store.cursor()
    try:
        got = read_traces(cur, [trace_id])
    finally:
        cur.close()
    if not got:
        raise BrowseError(404, f"no trace {trace_id!r} in this store")
    return got[0]


def stored_ids(store: Store, ids: list[str]) -> set[str]:
    """Which of ``ids`` the store holds."""
    if not ids:
        return set()
    cur = store.cursor()
    try:
        got = cur.execute("SELECT trace_id FROM summary WHERE list_contains(?, trace_id)", [ids]).fetchall()
    finally:
        cur.close()
    return {r[0] for r in got}


# ---------------------------------------------------------------- compare


@dataclass(frozen=True)
class Bar:
    lane: str
    t: float
    t_end: float
    label: str  # event id and type, shown as text
    diverged: bool  # at or after the first diverging event


@dataclass(frozen=True)
class Compared:
    a: Trace
    b: Trace
    offset: float  # seconds added to b's times so both share one axis
    fork_index: int | None  # b forks a (or a forks b) at this event index of the parent
    first_diverging: int | None  # index of the first event that differs (None: equal)
    lanes: list[str]
    bars_a: list[Bar]
    bars_b: list[Bar]


def fork_of(tr: Trace) -> dict[str, Any] | None:
    f = (tr.metadata or {}).get("fork")
    return f if isinstance(f, dict) else None


def compare(a: Trace, b: Trace) -> Compared:
    """Two traces on one axis. When one forks (or replays) the other, times are aligned at the
    fork event (the child's copy of it starts when the parent's did) and the first event whose
    content differs is marked."""
    fork_index = None
    fa, fb = fork_of(a), fork_of(b)
    if fb is not None and fb.get("parent") == a.trace_id:
        fork_index = _int(fb.get("index"))
    elif fa is not None and fa.get("parent") == b.trace_id:
        fork_index = _int(fa.get("index"))
    elif fa is not None and fb is not None and fa.get("group") == fb.get("group"):
        fork_index = _int(fa.get("index"))  # siblings: forks of one event
    first = first_difference(a, b)
    offset = 0.0
    if fork_index is not None and fork_index < min(len(a.events), len(b.events)):
        offset = a.events[fork_index].t - b.events[fork_index].t
    lanes = list(dict.fromkeys([*a.agents(), *b.agents()]))
    return Compared(a, b, offset, fork_index, first, lanes, _bars(a, first, 0.0), _bars(b, first, offset))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def first_difference(a: Trace, b: Trace) -> int | None:
    """Index of the first event that differs (the shorter length if one is a prefix of the
    other); None if the events are equal."""
    ea, eb = trace_to_dict(a)["events"], trace_to_dict(b)["events"]
    for i, (x, y) in enumerate(zip(ea, eb, strict=False)):
        if x != y:
            return i
    return None if len(ea) == len(eb) else min(len(ea), len(eb))


def _bars(tr: Trace, first: int | None, offset: float) -> list[Bar]:
    return [
        Bar(
            e.agent or "?",
            e.t + offset,
            (e.t_end if e.t_end is not None else e.t) + offset,
            f"{e.id} {e.type}",
            first is not None and i >= first,
        )
        for i, e in enumerate(tr.events)
    ]
