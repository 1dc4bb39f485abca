"""Trace commands: validate, stats, schema, gen, export."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import msgspec
import typer
from rich.markup import escape
from rich.table import Table

from ..core.counts import CorpusCounts, TraceCounts, corpus_counts, file_counts, trace_counts
from ..core.errors import Finding, OrchestraceError
from ..core.io import save
from ..core.read import split_format
from ..core.schema import schema_text
from ..core.validate import DEFAULT_MAX_FINDINGS, ValidationResult
from ..validation import INTERNAL, internal_finding, validate_files
from .inputs import STORE_SUFFIXES, expand_paths, foreign_log
from .output import console, console_err, fmt_number, json_document
from .progress import failure_exit_code, note_failed_file


def validate(
    paths: Annotated[list[str], typer.Argument(help="Files, directories, globs, or - for stdin.")],
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    max_findings: Annotated[
        int, typer.Option(min=0, help="List at most this many findings per file.")
    ] = DEFAULT_MAX_FINDINGS,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary line.")] = False,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Processes validating, this one included; a large JSONL file is shared out in "
            "pieces, and the output is the same for any number. Default: one per CPU other jobs leave "
            "free (1-minute load average), for 8 MB of input or more. 1: no other process; at most 4 per CPU.",
        ),
    ] = None,
) -> None:
    """Check traces against the schema and the semantic rules.

    Exit code 0 when every file is valid, 1 when any is invalid, 2 on a usage or I/O error,
    3 when orchestrace met a bug on a file (the other files are still validated and reported).

    Examples:\n
      orchestrace validate run.json\n
      orchestrace validate traces/ --format json\n
      cat run.json | orchestrace validate -
    """
    if format not in ("table", "json"):
        raise OrchestraceError("OT010", f"--format must be table or json, got {format!r}")
    results = _validated(paths, max_findings, workers)
    io_error = any(f.code == "OT001" for r in results for f in r.findings)
    internal = any(f.code == INTERNAL for r in results for f in r.findings)
    if format == "json":
        sys.stdout.buffer.write(json_document([r.to_json() for r in results]))
    else:
        for r in results:
            errs = sum(f.severity == "error" for f in r.findings)
            warns = len(r.findings) - errs
            mark = "[green]valid[/green]" if r.valid else "[red]invalid[/red]"
            console.print(
                f"{mark}  {escape(str(r.path))}  ({r.traces} trace(s), {errs} error(s), {warns} warning(s))",
                highlight=False,
            )
            if quiet:
                continue
            for f in r.findings:
                color = "red" if f.severity == "error" else "yellow"
                loc = " ".join(
                    x
                    for x in (f"line {f.line}" if f.line else "", "/" if f.pointer == "" else f.pointer or "")
                    if x
                )
                text = f"{loc}: {f.message}" if loc else f.message
                console.print(f"  [{color}]{f.code}[/{color}] {escape(text)}", highlight=False)
            if r.truncated:
                console.print(f"  ... and {r.truncated} more finding(s) not listed (--max-findings)")
        ok = sum(r.valid for r in results)
        console.print(f"{ok}/{len(results)} file(s) valid")
    if internal:
        raise typer.Exit(3)
    if io_error:
        raise typer.Exit(2)
    if not all(r.valid for r in results):
        raise typer.Exit(1)


def _validated(paths: list[str], max_findings: int, workers: int | None) -> list[ValidationResult]:
    """Results of every argument in order; a glob or directory that matches nothing is that
    argument's I/O error (exit 2 in the end), and the other arguments are still validated."""
    planned: list[str | ValidationResult] = []  # a file to validate, or its result already
    for path in paths:
        files: list[str] = []
        failure: Finding | None = None
        try:
            files.extend(expand_paths([path]))
        except OrchestraceError as e:
            failure = Finding(code=e.code, severity="error", message=e.message)
        except Exception as e:  # noqa: BLE001 - a bug met walking a folder must not hide its files
            failure = internal_finding(e, path)
        for f in files:
            if f.lower().endswith(STORE_SUFFIXES):
                msg = (
                    "a DuckDB store, not a trace file: its traces were validated when ingested "
                    f"(orchestrace export {f} --to jsonl -o traces.jsonl writes them out as a file)"
                )
                planned.append(
                    ValidationResult(f, False, [Finding(code="OT001", severity="error", message=msg, path=f)])
                )
            else:
                planned.append(f)
        if failure is not None:
            planned.append(ValidationResult(path, False, [failure]))
    checked = validate_files(
        [x for x in planned if isinstance(x, str)], max_findings=max_findings, workers=workers
    )
    return [_with_hint(next(checked)) if isinstance(x, str) else x for x in planned]


def _with_hint(r: ValidationResult) -> ValidationResult:
    """A foreign agent log's result: one line saying what it is, not one finding per record."""
    if r.valid or (r.findings and r.findings[0].code == INTERNAL) or not (hint := foreign_log(r.path)):
        return r
    code = next((x.code for x in r.findings if x.severity == "error"), "OT101")
    r.findings = [Finding(code=code, severity="error", message=hint, path=r.path)]
    r.traces = r.truncated = 0
    return r


def stats(
    paths: Annotated[list[str], typer.Argument(help="Trace files or directories.")],
    format: Annotated[str, typer.Option("--format", "-f", help="table or json")] = "table",
    per_trace: Annotated[
        bool, typer.Option("--per-trace", help="Also list every trace, one row each (several traces).")
    ] = False,
) -> None:
    """Counts by event type, agent and role; duration; costs. Event logs are validated, then
    streamed; an invalid trace exits 1 as validate does.

    One trace gets its own table; several get one corpus total (and, with --per-trace, one row
    per trace). JSON: an object with "traces" (the per-trace counts), "corpus" (their total) and
    "failed" (one finding per file that failed, as in analyze).
    A file that fails is reported on stderr and counts for nothing; the other files are still
    counted (exit 1, 2 if unreadable).

    Examples:\n
      orchestrace stats run.events.jsonl\n
      orchestrace stats corpus.jsonl --per-trace\n
      orchestrace stats corpus.jsonl --format json
    """
    if format not in ("table", "json"):  # -f bogus printed the table and exited 0
        raise OrchestraceError("OT010", f"--format must be table or json, got {format!r}")
    out: list[TraceCounts] = []
    failed: dict[int, OrchestraceError] = {}
    for i, p in enumerate(expand_paths(paths)):  # one bad file does not hide the others
        mark = len(out)
        try:
            out.extend(store_counts(p) if p.lower().endswith(STORE_SUFFIXES) else file_counts(p))
        except OrchestraceError as e:
            del out[mark:]  # a file that failed part-way counts for nothing, as in validate
            note_failed_file(failed, i, p, e)
    if format == "json":
        fails = [failed[i].finding() for i in sorted(failed)]
        doc = {"traces": out, "corpus": corpus_counts(out), "failed": fails}
        sys.stdout.buffer.write(json_document(msgspec.to_builtins(doc)))
    elif len(out) == 1:
        console.print(_detail_table(out[0], f"{out[0].trace_id}  ({out[0].path})"))
    elif out or not failed:
        _corpus_tables(out, per_trace)
    if failed:
        raise typer.Exit(failure_exit_code(failed))


def store_counts(path: str) -> Iterator[TraceCounts]:
    """Counts of every trace of a DuckDB store, as stats counts a file's."""
    from ..store import traces_of

    return (trace_counts(tr, path) for tr in traces_of(path))


def _corpus_tables(out: list[TraceCounts], per_trace: bool) -> None:
    if per_trace:
        rows = Table("trace", "path", title="per trace")
        for c in ("events", "edges", "agents", "duration (s)"):
            rows.add_column(c, justify="right")
        for x in out:
            n = (str(x.events), str(x.edges), str(len(x.by_agent)), fmt_number(x.duration_s, 6))
            rows.add_row(x.trace_id, x.path, *n)
        console.print(rows)
    title = f"corpus: {len(out)} traces in {len({x.path for x in out})} file(s)"
    console.print(_detail_table(corpus_counts(out), title))
    if not per_trace and len(out) > 1:
        console.print("(--per-trace lists each trace; --format json gives per-trace counts and the total)")


def _detail_table(s: TraceCounts | CorpusCounts, title: str) -> Table:
    corpus = isinstance(s, CorpusCounts)
    table = Table(title=title, show_header=True)
    table.add_column("what")
    table.add_column("count / value", justify="right")
    if isinstance(s, CorpusCounts):
        table.add_row("traces", str(s.traces))
    table.add_row("events", str(s.events))
    table.add_row("edges", str(s.edges))
    table.add_row("agents (summed over traces)" if corpus else "agents", str(s.agents))
    table.add_row("duration (s, summed)" if corpus else "duration (s)", fmt_number(s.duration_s, 6))
    for k, v in s.costs.items():
        table.add_row(f"costs.{k}", fmt_number(v, 6))
    for k, v in s.by_type.items():
        table.add_row(f"type {k}", str(v))
    for k, v in list(s.by_role.items())[:12]:
        table.add_row(f"role {k}", str(v))
    return table


def schema() -> None:
    """Print orchestrace's JSON Schema (draft 2020-12), a superset of the published minimal schema.

    Example:\n
      orchestrace schema > trace_schema.json
    """
    sys.stdout.write(schema_text())


def gen(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output file (.json, .jsonl, .events.jsonl, +.gz/.zst).")
    ],
    n: Annotated[int, typer.Option("--n", "-n", min=1, help="Number of traces.")] = 1,
    size: Annotated[int, typer.Option(min=1, help="Approximate events per trace.")] = 100,
    topology: Annotated[
        str,
        typer.Option(
            help="centralized, hierarchical, swarm, debate, planner_executor_critic, harness, or all"
        ),
    ] = "all",
    seed: Annotated[int, typer.Option(min=0, help="Seed; the same seed gives the same bytes.")] = 0,
    width: Annotated[int, typer.Option(min=1, help="Sub-agents per spawn round (max).")] = 4,
    error_rate: Annotated[float, typer.Option(help="Probability that a tool call fails.")] = 0.05,
) -> None:
    """Write realistic synthetic traces.

    Examples:\n
      orchestrace gen -o corpus.jsonl -n 1000 --size 1000\n
      orchestrace gen -o big.events.jsonl.zst --size 1000000 --topology centralized
    """
    from ..gen import GEN_TOPOLOGIES, generate

    if topology != "all" and topology not in GEN_TOPOLOGIES:
        raise OrchestraceError(
            "OT010", f"--topology must be one of {', '.join(GEN_TOPOLOGIES)} or all, got {topology!r}"
        )
    if not 0.0 <= error_rate <= 1.0:  # a probability (nan, 2 and -1 were taken)
        raise OrchestraceError("OT010", f"--error-rate must be a probability from 0 to 1, got {error_rate}")
    fmt, _ = split_format(str(out))
    if fmt != "jsonl" and n != 1:
        raise OrchestraceError("OT010", "several traces need a .jsonl output", path=str(out))
    from rich.progress import track

    traces = [
        generate(
            seed=seed + i,
            size=size,
            width=width,
            error_rate=error_rate,
            topology=GEN_TOPOLOGIES[i % len(GEN_TOPOLOGIES)] if topology == "all" else topology,
        )
        for i in track(
            range(n),
            description="generating",
            console=console_err,
            disable=n < 50 or not console_err.is_interactive,
        )
    ]
    save(traces, out)
    console_err.print(f"wrote {n} trace(s), {sum(len(t.events) for t in traces)} events -> {out}")


def export(
    paths: Annotated[list[str], typer.Argument(help="Trace files or directories.")],
    to: Annotated[str, typer.Option("--to", help="survey, jsonl, otlp, trl, verl, ...")],
    out: Annotated[str, typer.Option("--out", "-o", help="Output file or directory.")],
    opt: Annotated[
        list[str] | None, typer.Option("--opt", help="Exporter option key=value (repeatable).")
    ] = None,
) -> None:
    """Export traces to another format.

    Examples:\n
      orchestrace export run.json --to survey -o run.survey.json\n
      orchestrace export corpus.jsonl --to otlp -o spans.json\n
      orchestrace export corpus.jsonl --to trl -o samples/ --opt method=grpo --opt unit=agent
    """
    from ..export import get_exporter
    from ..store import traces_of

    fn = get_exporter(to)
    options: dict[str, str] = {}
    for kv in opt or []:
        if "=" not in kv:
            raise OrchestraceError("OT010", f"--opt expects key=value, got {kv!r}")
        k, v = kv.split("=", 1)
        options[k] = v
    traces = [t for p in expand_paths(paths) for t in traces_of(p)]
    count = fn(traces, out, **options)
    console_err.print(f"exported {count} item(s) -> {out}")


def register(app: typer.Typer) -> None:
    for fn in (validate, stats, schema, gen, export):
        app.command(fn.__name__)(fn)
