"""A hand-built trace for the store tests (numbers chosen to be checked by hand)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb

from orchestrace.core.model import Edge, Event, Trace
from orchestrace.core.validate import validate_trace
from orchestrace.store.schema import TABLES


def hand_trace(trace_id: str = "hand-1", reward: float = 1.0) -> Trace:
    """Orchestrator spawns a worker that calls a tool (which fails) and returns; numbers are round."""
    ev = [
        Event(
            id="e1",
            t=0,
            t_end=1,
            type="orchestrator_decision",
            agent="orch",
            role="lead",
            tokens_in=100,
            tokens_out=20,
            cost_usd=0.01,
            attrs={"k": [1, 2]},
            extra={"x_custom": "keep"},
        ),
        Event(id="e2", t=1, type="spawn", agent="orch", to="w"),
        Event(
            id="e3",
            t=2,
            t_end=4,
            type="tool_call",
            agent="w",
            role="worker",
            tool="search",
            call_id="c1",
            tokens_in=50,
            tokens_out=5,
            cost_usd=0.002,
            credit={"team": 0.5},
        ),
        Event(id="e4", t=4, type="tool_result", agent="w", tool="search", call_id="c1", status="error"),
        Event(
            id="e5",
            t=5,
            t_end=6,
            type="return",
            agent="w",
            from_="w",
            to="orch",
            tokens_in=10,
            tokens_out=10,
            cost_usd=0.001,
            credit={"team": 0.25, "w": 1.0},
        ),
        Event(id="e6", t=6, type="aggregate", agent="orch", credit={"team": 0.25}),
    ]
    edges = [
        Edge("e1", "e2", "causal"),
        Edge("e2", "e3", "spawn"),
        Edge("e3", "e4", "tool_dependency"),
        Edge("e4", "e5", "causal"),
        Edge("e5", "e6", "return"),
    ]
    tr = Trace(
        trace_id=trace_id,
        task_id="task-h",
        system="handmade",
        topology="centralized",
        events=ev,
        edges=edges,
        rewards={"team": reward, "success": 1.0},
        costs={"tokens": 195, "wall_clock_s": 6, "usd": 0.013},
        metrics={"task_success": 1.0},
        metadata={"started_at": "2025-03-04T10:00:00Z"},
    )
    assert not [f for f in validate_trace(tr) if f.severity == "error"]
    return tr


def dump_tables(store: Path) -> dict[str, list[tuple]]:
    """Every row of every table, sorted, for before/after comparisons."""
    con = duckdb.connect(str(store), read_only=True)
    try:
        return {name: sorted(con.execute(f"SELECT * FROM {name}").fetchall(), key=repr) for name in TABLES}
    finally:
        con.close()


class CliResult(subprocess.CompletedProcess):
    """What ``orchestrace ARGS`` printed and returned, run in this process."""


def run_cli(capsys, *args: str) -> CliResult:
    """``orchestrace.cli.main`` in-process (the same error handling as the real entry point)."""
    from orchestrace.cli import main

    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    out = capsys.readouterr()
    return CliResult(list(args), code, out.out, out.err)
