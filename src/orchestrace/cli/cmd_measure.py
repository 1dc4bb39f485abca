"""Measure commands: analyze (E1-E4 per trace and per corpus), critical-path, safety.

``orchestrace.measure`` (numpy, scipy) is imported inside the commands, so other commands start fast.
"""

from __future__ import annotations

import csv
import functools
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import orjson
import typer
from rich.markup import escape
from rich.table import Table

from ..core.errors import OrchestraceError
from ..core.model import Trace
from .inputs import expand_paths
from .output import console, console_err, fmt_number, json_document
from .progress import failure_exit_code, stream_file_traces, stream_traces
from .ray_option import RayCommand, RayOption

if TYPE_CHECKING:
    from ..measure.pipeline import Repeats

_FORMATS = ("table", "json", "csv")
_BY = ("topology", "system", "agent", "role", "type")
_TABLE_COLS = (
    ("trace_id", "trace"),
    ("events", "events"),
    ("task_success", "E1"),
    ("critical_steps", "crit.steps"),
    ("critical_path_s", "crit.path s"),
    ("parallel_speedup", "speedup"),
    ("max_concurrency", "max conc"),
    ("useful_agent_utilization", "useful"),
    ("protocol_overhead", "overhead"),
    ("message_redundancy", "redund."),
    ("error_amplification", "err.amp"),
    ("tainted_decisions", "tainted dec."),
)
_MAX_TABLE_ROWS = 50


def _traces(paths: list[str]) -> Iterator[tuple[str, Trace]]:
    """Traces of files, directories, globs, or DuckDB stores (``*.duckdb``)."""
    from ..store import traces_of

    for p in expand_paths(paths):
        for tr in traces_of(p):
            yield p, tr


def _check(name: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        raise OrchestraceError("OT010", f"{name} must be one of {', '.join(allowed)}, got {value!r}")


def _verifier(spec: str | None, channel: str | None) -> Callable[[Trace], Any] | None:
    if spec and channel:
        raise OrchestraceError("OT010", "give --verifier or --success-channel, not both")
    if channel:
        from ..measure.analyze import success_flag

        return functools.partial(success_flag, channel=channel)
    if not spec:
        return None
    from ..core.plugins import resolve

    return resolve(spec, what="verifier", code="OT010")


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return fmt_number(v)
    return str(v)


def _json(obj: Any) -> None:
    sys.stdout.buffer.write(json_document(obj, orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY))


def analyze_cmd(
    paths: Annotated[list[str], typer.Argument(help="Trace files, directories or globs.")],
    format: Annotated[str, typer.Option("--format", "-f", help="table, json or csv")] = "table",
    by: Annotated[
        str | None, typer.Option("--by", help="Group by topology, system, agent, role or (event) type.")
    ] = None,
    verifier: Annotated[
        str | None, typer.Option(help="E1 from a callable package.module:function(trace) -> float.")
    ] = None,
    success_channel: Annotated[
        str | None, typer.Option(help="E1 from this reward channel (e.g. team) when it is a success flag.")
    ] = None,
    write: Annotated[
        str | None, typer.Option("--write", "-o", help="Also save the traces with metrics written back here.")
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    ray: RayOption = None,
) -> None:
    """E1-E4 and safety metrics per trace, summarised over the corpus (mean and percentiles),
    per trace-length band (10 / 100 / 1,000 events), with a MAS-native verdict.

    JSON: an object with "traces" (a list, one object per trace), "corpus" and "failed" (one
    finding per input file that could not be analysed); a value is null where the trace lacks
    the data. A file that fails is reported and counts for nothing; the other files are still
    analysed (exit 1, 2 if unreadable). With --write the first bad file stops the command, so
    the output is complete or absent. CSV: one row per trace (per group with --by agent|role|type).

    Examples:\n
      orchestrace analyze run.json\n
      orchestrace analyze corpus/ --by topology\n
      orchestrace analyze corpus.jsonl --format json --success-channel team\n
      orchestrace analyze runs/*.json --by agent --format csv > agents.csv\n
      orchestrace analyze run.json -o run.measured.json\n
      orchestrace analyze big.jsonl --ray                 # traces analysed as Ray tasks (local, loopback)
    """
    from ..core.io import save
    from ..measure import write_metrics
    from ..measure.pipeline import Repeats, corpus_analysis, measure_traces

    _check("--format", format, _FORMATS)
    _check("--by", by, _BY)
    check = _verifier(verifier, success_channel)
    kept: list[tuple[int, dict[str, Any], dict[str, dict[str, Any]] | None]] = []
    failed: dict[int, OrchestraceError] = {}
    channels: set[str] = set()  # reward channels seen, to name them when --success-channel found none
    repeats = Repeats()  # trace ids met twice: a replay beside its recording is measured once

    def measured() -> Iterator[Trace]:  # one trace in memory at a time (.jsonl outputs stream too)
        if write:  # an output file is written whole or not at all: the first bad input stops it
            traces: Iterator[tuple[int, Trace]] = (
                (0, tr) for tr in stream_traces(paths, "analyze", quiet=quiet)
            )
        else:
            traces = stream_file_traces(paths, "analyze", failed, quiet=quiet)
        for m in measure_traces(traces, failed, verifier=check, by=by, ray=ray, repeats=repeats):
            kept.append((m.file, m.metrics, m.groups))
            channels.update(m.trace.rewards)
            yield write_metrics(m.trace, m.metrics) if write else m.trace

    n_written = 0
    if write:
        n_written = save(measured(), write)
    else:
        for _ in measured():
            pass
    result = corpus_analysis(kept, failed, by)
    _say_repeats(repeats, paths)
    if result is None and failed:
        if format == "json":
            _json({"traces": [], "corpus": None, "failed": _failures(failed)})
        raise typer.Exit(failure_exit_code(failed))
    if result is None:
        raise OrchestraceError("OT001", "no traces found in the given paths")
    if write:  # on stderr: stdout may be the JSON or CSV report
        console_err.print(f"wrote {n_written} trace(s) with their metrics -> {write}", highlight=False)
    if success_channel and success_channel not in channels:  # a typo left E1 empty without a word
        console_err.print(
            f"[yellow]warning:[/yellow] no trace has rewards.{escape(success_channel)}, so E1 (task_success) "
            f"is empty; the traces have {escape(', '.join(sorted(c for c in channels if '/' not in c)) or 'no reward channel')}",
            highlight=False,
        )
    if format == "json":
        _json({"traces": result.traces, "corpus": result.corpus, "failed": _failures(failed)})
    elif format == "csv":
        _csv(result.traces, result.groups, by)
    else:
        _tables(result.traces, result.corpus, result.groups, by)
    if failed:
        raise typer.Exit(failure_exit_code(failed))


def _say_repeats(repeats: Repeats, paths: list[str]) -> None:
    """On stderr (stdout may be the JSON or CSV): the copies measured once, and the ids that name
    two different traces (both measured), with their files."""
    if repeats.duplicates:
        console_err.print(
            f"{repeats.duplicates} duplicate(s) of a trace earlier in the input (same id and content) "
            "measured once",
            highlight=False,
        )
    if repeats.conflicts:
        files = list(expand_paths(paths))
        for tid, first, later in repeats.conflicts:
            where = "both in " + files[first] if first == later else f"in {files[first]} and {files[later]}"
            console_err.print(
                f"[yellow]warning:[/yellow] trace id {escape(repr(tid))} names two traces with different "
                f"content ({escape(where)}): both measured (ingest stores the first and refuses the other, OT310)",
                highlight=False,
            )


def _failures(failed: dict[int, OrchestraceError]) -> list[dict[str, Any]]:
    """The files that could not be analysed, one finding each (as validate reports them)."""
    return [msgspec.to_builtins(failed[i].finding()) for i in sorted(failed)]


def _csv(results: list[dict[str, Any]], groups: dict[str, dict[str, Any]] | None, by: str | None) -> None:
    out = csv.writer(sys.stdout, lineterminator="\n")
    if groups is not None:
        cols = list(next(iter(groups.values())).keys()) if groups else []
        out.writerow([by, *cols])
        for name, row in groups.items():
            out.writerow([name, *(row.get(c) for c in cols)])
        return
    cols = list(results[0].keys())
    out.writerow(cols)
    for r in results:
        out.writerow(["" if r.get(c) is None else r.get(c) for c in cols])


def _tables(  # noqa: C901 - one table after the other
    results: list[dict[str, Any]],
    report: dict[str, Any],
    groups: dict[str, dict[str, Any]] | None,
    by: str | None,
) -> None:
    if len(results) == 1:
        r = results[0]
        t = Table(title=f"trace {r['trace_id']}")
        t.add_column("metric")
        t.add_column("value", justify="right")
        for k, val in r.items():
            if k != "trace_id":
                t.add_row(k, _fmt(val))
        console.print(t)
    elif len(results) <= _MAX_TABLE_ROWS:
        t = Table(title="per trace")
        for _, head in _TABLE_COLS:
            t.add_column(head, justify="left" if head == "trace" else "right")
        for r in results:
            t.add_row(*(_fmt(r.get(k)) for k, _ in _TABLE_COLS))
        console.print(t)
    else:
        console.print(f"{len(results)} traces; per-trace rows omitted (use --format json or csv)")
    from ..measure import REPORT_KEYS, mas_native_line

    s = Table(title=f"corpus: {report['traces']} trace(s)")
    if len(results) == 1:
        console.print(mas_native_line(report), highlight=False)
        return
    for c in ("metric", "n", "mean", "p10", "p50", "p90", "min", "max"):
        s.add_column(c, justify="left" if c == "metric" else "right")
    for k in REPORT_KEYS[1:]:
        row = report["summary"].get(k)
        if row:
            s.add_row(k, *(_fmt(row[c]) for c in ("n", "mean", "p10", "p50", "p90", "min", "max")))
    console.print(s)
    b = Table(title="by trace-length band (mean)")
    keys = ("critical_steps", "parallel_speedup", "protocol_overhead", "error_amplification")
    for c in ("band (events)", "traces", *keys):
        b.add_column(c, justify="left" if c.startswith("band") else "right")
    for name, band in report["bands"].items():
        b.add_row(name, str(band["traces"]), *(_fmt(band["summary"].get(k, {}).get("mean")) for k in keys))
    console.print(b)
    if groups is not None:
        g = Table(title=f"by {by} (summed over traces)")
        cols = ("traces", "events", "tokens", "usd", "busy_s", "tool_calls", "messages")
        for c in (by or "", *cols):
            g.add_column(c, justify="left" if c == by else "right")
        for name, row in groups.items():
            g.add_row(name, *(_fmt(row.get(c)) for c in cols))
        console.print(g)
    elif "groups" in report:
        g = Table(title=f"by {report['by']} (mean)")
        keys = (
            "task_success",
            "critical_steps",
            "parallel_speedup",
            "protocol_overhead",
            "error_amplification",
        )
        for c in (report["by"], "traces", *keys):
            g.add_column(c, justify="left" if c == report["by"] else "right")
        for name, grp in report["groups"].items():
            g.add_row(name, str(grp["traces"]), *(_fmt(grp["summary"].get(k, {}).get("mean")) for k in keys))
        console.print(g)
    console.print(mas_native_line(report), highlight=False)


def critical_path_cmd(
    trace: Annotated[str, typer.Argument(help="A trace file (every trace in it is shown).")],
    by: Annotated[
        str, typer.Option("--by", help="time (wall-clock) or steps (Kimi Critical Steps)")
    ] = "time",
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
) -> None:
    """Print the critical path: the chain of dependent events that bounds the run's duration.

    Examples:\n
      orchestrace critical-path run.json\n
      orchestrace critical-path run.json --by steps --format json
    """
    import numpy as np

    from ..measure import TraceView, critical_path, critical_steps, step_weights

    _check("--by", by, ("time", "steps"))
    _check("--format", format, ("table", "json"))
    out = []
    for _, tr in _traces([trace]):
        v = TraceView(tr)
        if by == "time":
            cp = critical_path(v)
            w, total, serial, cum = v.effective_duration, cp["length_s"], cp["serial_work_s"], cp["finish_s"]
        else:
            cp = critical_steps(v)
            w, total, serial = step_weights(v), float(cp["critical"]), float(cp["total"])
            cum = np.cumsum(w[cp["path"]]).tolist()
        rows = [
            {
                "id": tr.events[i].id,
                "type": tr.events[i].type,
                "agent": tr.events[i].agent,
                "t": tr.events[i].t,
                "weight": float(w[i]),
                "cumulative": acc,
            }
            for i, acc in zip(cp["path"], cum, strict=True)
        ]
        out.append({"trace_id": tr.trace_id, "by": by, "length": total, "serial": serial, "path": rows})
    if format == "json":
        _json(out)
        return
    unit = "s" if by == "time" else "steps"
    for o in out:
        t = Table(
            title=f"{o['trace_id']}: critical path {fmt_number(o['length'])} {unit} of {fmt_number(o['serial'])} {unit} serial"
        )
        # time: finish in a replay with unlimited agents; steps: running total
        last = "finish (s)" if by == "time" else "cumulative"
        for c in ("#", "id", "type", "agent", "t", f"weight ({unit})", last):
            t.add_column(c, justify="left" if c in ("id", "type", "agent") else "right")
        for k, r in enumerate(o["path"], 1):
            t.add_row(
                str(k), r["id"], r["type"], r["agent"], _fmt(r["t"]), _fmt(r["weight"]), _fmt(r["cumulative"])
            )
        console.print(t)


def safety_cmd(
    trace: Annotated[str, typer.Argument(help="A trace file (every trace in it is shown).")],
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    limit: Annotated[int, typer.Option(min=0, help="Show at most this many flows per trace.")] = 100,
) -> None:
    """Print untrusted-content flows: each decision reachable from untrusted content with no
    sanitising event (safety_event, human_intervention) on the way, one shortest path each,
    with inferred attack vectors AV1-AV8.

    Examples:\n
      orchestrace safety run.json\n
      orchestrace safety run.json --format json --limit 10
    """
    from ..measure import TraceView, safety_metrics, taint_flows

    _check("--format", format, ("table", "json"))
    out = []
    for _, tr in _traces([trace]):
        v = TraceView(tr)
        r = safety_metrics(v)
        out.append(
            {
                "trace_id": tr.trace_id,
                "instrumented": r["tainted_decisions"] is not None,
                "untrusted_sources": r["untrusted_sources"],
                "tainted_events": r["tainted_events"],
                "tainted_decisions": r["tainted_decisions"],
                "taint_reach": r["taint_reach"],
                "sanitized": r["sanitized"],
                "flows": taint_flows(v, limit=limit) if r["tainted_decisions"] is not None else [],
            }
        )
    if format == "json":
        _json(out)
        return
    for o in out:
        if not o["instrumented"]:
            console.print(
                f"{o['trace_id']}: no trust information (no event sets `trusted`, no tool is marked external)"
            )
            continue
        console.print(
            f"{o['trace_id']}: {o['untrusted_sources']} untrusted source(s), {o['tainted_events']} tainted "
            f"event(s) of which {o['tainted_decisions']} decision(s); sources and tainted events are "
            f"{o['taint_reach']:.1%} of events; {o['sanitized']} sanitising event(s) hit",
            highlight=False,
        )
        if not o["flows"]:
            continue
        t = Table()
        for c in ("decision", "type", "agent", "vectors", "path (source first)"):
            t.add_column(c)
        for f in o["flows"]:
            name = f["decision"] + (" (final)" if f["final"] else "")
            t.add_row(name, f["type"], f["agent"], " ".join(f["attack_vectors"]), " -> ".join(f["path"]))
        console.print(t)
        if o["tainted_decisions"] > len(o["flows"]):
            console.print(f"... {o['tainted_decisions'] - len(o['flows'])} more (raise --limit)")


def register(app: typer.Typer) -> None:
    app.command("analyze", cls=RayCommand)(analyze_cmd)
    app.command("critical-path")(critical_path_cmd)
    app.command("safety")(safety_cmd)
