"""Viewer commands: ``orchestrace view`` (HTML trace viewer) and ``orchestrace report`` (plots)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .output import console, console_err


def view(
    trace: Annotated[
        str,
        typer.Argument(help="A trace file (.json, .jsonl, .events.jsonl, optionally .gz/.zst) or a store."),
    ],
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="HTML file to write (default: TRACE name + .html).")
    ] = None,
    index: Annotated[
        int | None, typer.Option("--index", help="Which trace of a multi-trace file or store (0-based).")
    ] = None,
    trace_id: Annotated[str | None, typer.Option("--trace", help="The trace with this id.")] = None,
    max_content: Annotated[
        int, typer.Option("--max-content", min=0, help="Characters of each event's content kept in the page.")
    ] = 4000,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the page on 127.0.0.1 until Ctrl-C.")] = False,
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port for --serve (0 = any free port).")
    ] = 0,
) -> None:
    """Write one self-contained, offline HTML page for a trace: swimlane timeline, event DAG,
    critical path, untrusted-content flows, details on click, credit as a colour scale.

    Examples:\n
      orchestrace view run.json -o run.html\n
      orchestrace view corpus.jsonl --index 3 -o third.html\n
      orchestrace view traces.duckdb --trace gen-swarm-30-3\n
      orchestrace view run.json --serve --port 8765
    """
    from ..core.io import atomic_output
    from ..viewer import render_html
    from ..viewer.pick import pick_trace
    from ..viewer.serve import make_server
    from .progress import count_traces

    picked = pick_trace(trace, index=index, trace_id=trace_id)
    chosen = picked.trace
    if picked.more:
        n = count_traces([trace])
        console_err.print(
            f"{trace} holds {n if n is not None else 'several'} traces; showing #{picked.position} "
            f"{chosen.trace_id!r} (choose another with --index K or --trace ID)",
            highlight=False,
        )
    html = render_html(chosen, max_content=max_content)
    if out is not None or not serve:
        dest = Path(out) if out is not None else _default_out(trace)
        with atomic_output(dest) as tmp:
            Path(tmp).write_text(html, encoding="utf-8")
        console_err.print(f"wrote {dest} ({len(chosen.events)} events, {len(html) / 1e6:.1f} MB)")
    if serve:
        server = make_server(html, port)
        host, p = server.server_address[:2]
        console.print(f"serving http://{host}:{p}/  (Ctrl-C to stop)", highlight=False)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


def _default_out(trace: str) -> Path:
    p = Path(trace)
    name = p.name
    for suffix in (".gz", ".zst", ".json", ".jsonl", ".events"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return p.with_name(name + ".html")


def report(
    run_dir: Annotated[str, typer.Argument(help="Directory written by an analysis or training run.")],
    out: Annotated[
        str | None,
        typer.Option(
            "--out",
            "-o",
            help="Output directory (default: RUN_DIR/report, or RUN_DIR itself if it is named report).",
        ),
    ] = None,
) -> None:
    """HTML report with PNG plots of a run: accuracy-vs-cost Pareto curves (pareto.json), learning
    curves (learning_curve.json), per-agent cost breakdowns (analysis.json or trace files).

    Examples:\n
      orchestrace report runs/stop            # the main job: writes runs/stop/report/report.html\n
      orchestrace report runs/analysis -o /tmp/report
    """
    from ..viewer.report import build_report

    res = build_report(run_dir, out)
    console_err.print(f"wrote {res.html} ({len(res.pngs)} plot(s))")
    for p in res.pngs:
        console.print(str(p), highlight=False)


def ui(
    store: Annotated[
        str, typer.Option("--store", "-s", help="The DuckDB store file (created by ingest).")
    ] = "traces.duckdb",
    run: Annotated[
        list[str] | None,
        typer.Option("--run", help="A train team / loop stop output folder to show (repeatable)."),
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; anything but loopback exposes the store.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port (0 = any free port).")] = 8765,
    max_content: Annotated[
        int,
        typer.Option("--max-content", min=0, help="Characters of each event's content kept in a trace page."),
    ] = 4000,
) -> None:
    """Browse a store in the web browser: the list of traces (sort, filter, distributions), each
    trace in the viewer, two traces compared (a fork aligned with its parent), training runs'
    learning curves down to their traces. Read-only; 127.0.0.1 unless --host.

    Examples:\n
      orchestrace ui -s traces.duckdb\n
      orchestrace ui -s traces.duckdb --run runs/team --port 8800
    """
    from ..viewer.browse.server import LOOPBACK, ui_server

    if host not in LOOPBACK:
        console_err.print(
            f"warning: serving on {host}: anyone who can reach this address can read every trace in {store}",
            highlight=False,
        )
    server, app = ui_server(store, run or [], host=host, port=port, max_content=max_content)
    if app.store.notice:
        console_err.print(f"note: {app.store.notice}", highlight=False)
    h, p = server.server_address[:2]
    console.print(f"serving http://{h}:{p}/  (Ctrl-C to stop)", highlight=False)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def register(app: typer.Typer) -> None:
    app.command("view")(view)
    app.command("ui")(ui)
    app.command("report")(report)
