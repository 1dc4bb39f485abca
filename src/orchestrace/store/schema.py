"""The store's tables: one DuckDB file, eight tables, documented in docs/store.md.

Every table carries ``trace_id``; a trace is the unit of ingest (all its rows are written or none).
There are no primary-key constraints: uniqueness of ``trace_id`` in ``traces`` is kept by ingest
itself (DuckDB's constraint check rejects a delete and re-insert of one key inside a transaction).

``traces.header`` holds the trace's top-level fields verbatim (rewards, costs, metrics, metadata),
so a trace read back from the store is equal to the one ingested; the other tables exist to query.
"""

from __future__ import annotations

from typing import Final

from ..core.model import EVENT_FIELD_TYPES

#: Bumped when a table changes; a store written by another version is refused with a clear error.
STORE_VERSION: Final = "orchestrace-store/3"
#: Versions read as they are: /1 lacks ``summary`` (an ingest into it adds the table; the trace
#: browser builds it in memory meanwhile); before /3 ``agents.busy_s`` summed ``t_end - t`` of the
#: agent's events, another quantity than ``analyze --by agent``'s ``busy_s`` (an ingest into such a
#: store recomputes it).
READABLE_VERSIONS: Final = ("orchestrace-store/1", "orchestrace-store/2", STORE_VERSION)

#: JSON event field -> events column, one per field with a scalar value (attrs is a JSON column,
#: credit has its own table). Field order, but t_end beside t (stores written so far have it there
#: and rows are inserted by position); the two SQL keywords among the names are renamed.
_SCALAR_FIELDS = [f for f, ty in EVENT_FIELD_TYPES.items() if ty is not dict and f != "t_end"]
_SCALAR_FIELDS.insert(_SCALAR_FIELDS.index("t") + 1, "t_end")
EVENT_COLUMNS: Final[dict[str, str]] = {
    f: {"from": "from_agent", "to": "to_agent"}.get(f, f) for f in _SCALAR_FIELDS
}
_SQL_TYPE: Final = {str: "VARCHAR", float: "DOUBLE", int: "BIGINT", bool: "BOOLEAN"}

#: (column, DuckDB type) per table, in column order.
TABLES: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    "traces": (
        ("trace_id", "VARCHAR"),
        ("task_id", "VARCHAR"),
        ("system", "VARCHAR"),
        ("topology", "VARCHAR"),
        ("schema_version", "VARCHAR"),
        ("date", "DATE"),
        ("n_events", "INTEGER"),
        ("n_edges", "INTEGER"),
        ("digest", "VARCHAR"),
        ("measured", "BOOLEAN"),
        ("source", "VARCHAR"),
        ("ingested_at", "TIMESTAMP"),
        ("header", "JSON"),
    ),
    "events": (
        ("trace_id", "VARCHAR"),
        ("idx", "INTEGER"),
        *((col, _SQL_TYPE[EVENT_FIELD_TYPES[f]]) for f, col in EVENT_COLUMNS.items()),
        ("attrs", "JSON"),
        ("extra", "JSON"),
        ("critical", "BOOLEAN"),
    ),
    "edges": (
        ("trace_id", "VARCHAR"),
        ("idx", "INTEGER"),
        ("src", "VARCHAR"),
        ("dst", "VARCHAR"),
        ("type", "VARCHAR"),
    ),
    "agents": (
        ("trace_id", "VARCHAR"),
        ("agent", "VARCHAR"),
        ("role", "VARCHAR"),
        ("first_idx", "INTEGER"),
        ("events", "INTEGER"),
        ("tokens_in", "BIGINT"),
        ("tokens_out", "BIGINT"),
        ("cost_usd", "DOUBLE"),
        ("busy_s", "DOUBLE"),
        ("first_t", "DOUBLE"),
        ("last_t", "DOUBLE"),
        ("tool_calls", "INTEGER"),
        ("messages", "INTEGER"),
        ("errors", "INTEGER"),
        ("critical_events", "INTEGER"),
    ),
    "rewards": (
        ("trace_id", "VARCHAR"),
        ("channel", "VARCHAR"),
        ("value", "DOUBLE"),
    ),
    "credits": (
        ("trace_id", "VARCHAR"),
        ("event_idx", "INTEGER"),
        ("event_id", "VARCHAR"),
        ("ord", "INTEGER"),
        ("channel", "VARCHAR"),
        ("value", "DOUBLE"),
    ),
    "metrics": (
        ("trace_id", "VARCHAR"),
        ("source", "VARCHAR"),
        ("name", "VARCHAR"),
        ("value", "DOUBLE"),
    ),
    # one row per trace, what a list of traces shows and sorts by (``SUMMARY_SQL``): the
    # browser's list and filters read 100,000 rows here instead of 10 M events and 4 M metrics
    "summary": (
        ("trace_id", "VARCHAR"),
        ("system", "VARCHAR"),
        ("task_id", "VARCHAR"),
        ("topology", "VARCHAR"),
        ("date", "DATE"),
        ("status", "VARCHAR"),
        ("events", "INTEGER"),
        ("agents", "INTEGER"),
        ("tokens", "BIGINT"),
        ("usd", "DOUBLE"),
        ("wall_clock_s", "DOUBLE"),
        ("critical_path_s", "DOUBLE"),
        ("parallel_speedup", "DOUBLE"),
        ("critical_steps", "DOUBLE"),
        ("team_reward", "DOUBLE"),
        ("errors", "INTEGER"),
        ("parent_id", "VARCHAR"),
        ("tools", "VARCHAR"),
    ),
}

#: Tables filled from prepared rows; ``agents`` and ``summary`` are derived from them inside the
#: transaction.
ROW_TABLES: Final = ("traces", "events", "edges", "rewards", "credits", "metrics")
#: Columns the prepared rows of a table carry beyond the table's own, for the derived tables:
#: each event's share of its agent's busy time (``measure``'s ``TraceView.busy_time``; NULL for a
#: trace ingested without measure), which ``agents.busy_s`` sums.
ROW_EXTRA: Final[dict[str, tuple[tuple[str, str], ...]]] = {"events": (("_busy", "DOUBLE"),)}
DERIVED_TABLES: Final = ("agents", "summary")

#: ``metrics.source`` values: the trace's own ``metrics`` map, its ``costs`` map, and what
#: ``orchestrace.measure.analyze`` computed at ingest.
METRIC_SOURCES: Final = ("recorded", "costs", "measure")

#: ORDER BY the agent's first event in the input: the rows land in one order whatever the number
#: of DuckDB threads or ingest workers, and wherever the input was cut into chunks
_AGENTS_SQL = """
INSERT INTO agents
SELECT trace_id, agent,
       arg_min(role, idx) FILTER (WHERE role IS NOT NULL),
       min(idx), count(*)::INTEGER,
       coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), coalesce(sum(cost_usd), 0.0),
       sum(_busy),
       min(t), max(coalesce(t_end, t)),
       count(*) FILTER (WHERE type = 'tool_call')::INTEGER,
       count(*) FILTER (WHERE type = 'message')::INTEGER,
       count(*) FILTER (WHERE status = 'error')::INTEGER,
       count(*) FILTER (WHERE critical)::INTEGER
FROM {events}
GROUP BY trace_id, agent
ORDER BY min(_pos)
"""


#: ``status``: the run's own outcome when it says error (``metadata.outcome.status``, the
#: runtime's), else success / failure by ``task_success`` (measure's, else the recorded metric),
#: else the outcome's status, else ``error`` when an event failed, else ``unknown``.
#: Tokens, USD and wall clock are measure's figures when the trace was measured, else the events'
#: sums and span (measure's token count is a float: 2**63 - 1 tokens, which validation allows,
#: is past BIGINT as a float, so the events' exact sum is taken then). ``tools``: the distinct
#: tool names, space-separated, for the text filter.
_SUMMARY_SQL = """
INSERT INTO summary
WITH ev AS (
    SELECT trace_id, count(DISTINCT agent)::INTEGER AS agents,
           TRY_CAST(sum(coalesce(tokens_in, 0)::HUGEINT + coalesce(tokens_out, 0)) AS BIGINT) AS tokens,
           sum(cost_usd) AS usd, max(coalesce(t_end, t)) - min(t) AS span,
           count(*) FILTER (WHERE status = 'error')::INTEGER AS errors,
           string_agg(DISTINCT tool, ' ' ORDER BY tool) AS tools
    FROM {events} GROUP BY trace_id
), me AS (
    SELECT trace_id,
           any_value(value) FILTER (WHERE source = 'measure' AND name = 'tokens') AS tokens,
           any_value(value) FILTER (WHERE source = 'measure' AND name = 'usd') AS usd,
           any_value(value) FILTER (WHERE source = 'measure' AND name = 'wall_clock_s') AS wall_clock_s,
           any_value(value) FILTER (WHERE source = 'measure' AND name = 'critical_path_s') AS critical_path_s,
           any_value(value) FILTER (WHERE source = 'measure' AND name = 'parallel_speedup') AS parallel_speedup,
           any_value(value) FILTER (WHERE source = 'measure' AND name = 'critical_steps') AS critical_steps,
           coalesce(any_value(value) FILTER (WHERE source = 'measure' AND name = 'task_success'),
                    any_value(value) FILTER (WHERE source = 'recorded' AND name = 'task_success'))
               AS task_success
    FROM {metrics} WHERE source IN ('measure', 'recorded') GROUP BY trace_id
), rw AS (
    SELECT trace_id, any_value(value) AS team FROM {rewards} WHERE channel = 'team' GROUP BY trace_id
), tr AS (
    SELECT *, json_extract_string(header, '$.metadata.outcome.status') AS outcome
    FROM {traces}
)
SELECT tr.trace_id, tr.system, tr.task_id, tr.topology, tr.date::DATE,
       CASE WHEN tr.outcome = 'error' THEN 'error'
            WHEN me.task_success >= 0.5 THEN 'success'
            WHEN me.task_success IS NOT NULL THEN 'failure'
            WHEN tr.outcome IS NOT NULL THEN tr.outcome
            WHEN ev.errors > 0 THEN 'error'
            ELSE 'unknown' END,
       tr.n_events, coalesce(ev.agents, 0), coalesce(TRY_CAST(me.tokens AS BIGINT), ev.tokens, 0),
       coalesce(me.usd, ev.usd, 0.0), coalesce(me.wall_clock_s, ev.span),
       me.critical_path_s, me.parallel_speedup, me.critical_steps, rw.team,
       coalesce(ev.errors, 0), json_extract_string(tr.header, '$.metadata.fork.parent'), ev.tools
FROM tr LEFT JOIN ev USING (trace_id) LEFT JOIN me USING (trace_id) LEFT JOIN rw USING (trace_id)
ORDER BY {order}
"""


def summary_sql(traces: str, events: str, metrics: str, rewards: str, *, ordered: bool) -> str:
    """SQL that inserts the ``summary`` rows of the traces in relation ``traces`` (rows being
    ingested, with ``_pos``, when ``ordered``; else a whole stored table, in trace id order)."""
    return _SUMMARY_SQL.format(
        traces=traces,
        events=events,
        metrics=metrics,
        rewards=rewards,
        order="tr._pos" if ordered else "tr.trace_id",
    )


def ddl() -> list[str]:
    """CREATE statements for every table plus the ``store_info`` key/value table."""
    out = ["CREATE TABLE IF NOT EXISTS store_info (key VARCHAR, value VARCHAR)"]
    for name, cols in TABLES.items():
        body = ", ".join(f'"{c}" {t}' for c, t in cols)
        out.append(f"CREATE TABLE IF NOT EXISTS {name} ({body})")
    return out


def agents_sql(events_relation: str) -> str:
    """SQL that derives ``agents`` rows from the events rows of whole traces held in relation
    ``events_relation`` (the rows ingest is inserting: the stored events table is not scanned),
    which also has ``_pos``, each row's position in the input."""
    return _AGENTS_SQL.format(events=events_relation)
