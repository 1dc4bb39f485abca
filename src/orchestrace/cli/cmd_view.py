"""Viewer commands: ``orchestrace view`` (HTML trace viewer) and ``orchestrace report`` (plots)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..core.errors import OrchestraceError
from .common import console, console_err


def view(
    trace: Annotated[
        str, typer.Argument(help="A trace file (.json, .jsonl, .events.jsonl, optionally .gz/.zst).")
    ],
    out: Annotated[
        str | None, typer.Option("--out", "-o", help="HTML file to write (default: TRACE name + .html).")
    ] = None,
    index: Annotated[int, typer.Option("--index", help="Which trace of a multi-trace file (0-based).")] = 0,
    max_content: Annotated[
        int, typer.Option("--max-content", help="Characters of each event's content kept in the page.")
    ] = 4000,
    serve: Annotated[bool, typer.Option("--serve", help="Serve the page on 127.0.0.1 until Ctrl-C.")] = False,
    port: Annotated[int, typer.Option("--port", help="Port for --serve (0 = any free port).")] = 0,
) -> None:
    """Write one self-contained, offline HTML page for a trace: swimlane timeline, event DAG,
    critical path, untrusted-content flows, details on click, credit as a colour scale.

    Examples:\n
      orchestrace view run.json -o run.html\n
      orchestrace view corpus.jsonl --index 3 -o third.html\n
      orchestrace view run.json --serve --port 8765
    """
    from ..core.io import iter_traces
    from ..viewer import render_html
    from ..viewer.serve import make_server

    if index < 0:
        raise OrchestraceError("OT010", f"--index must be >= 0, got {index}")
    chosen = None
    for k, tr in enumerate(iter_traces(trace)):
        if k == index:
            chosen = tr
            break
    if chosen is None:
        raise OrchestraceError("OT010", f"the file holds fewer than {index + 1} trace(s)", path=trace)
    html = render_html(chosen, max_content=max_content)
    if out is not None or not serve:
        dest = Path(out) if out is not None else _default_out(trace)
        dest.write_text(html, encoding="utf-8")
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
        str | None, typer.Option("--out", "-o", help="Output directory (default: RUN_DIR/report).")
    ] = None,
) -> None:
    """HTML report with PNG plots of a run: accuracy-vs-cost Pareto curves (pareto.json), learning
    curves (learning_curve.json), per-agent cost breakdowns (analysis.json or trace files).

    Examples:\n
      orchestrace report runs/stop-2026-11-22\n
      orchestrace report runs/analysis -o /tmp/report
    """
    from ..viewer.report import build_report

    res = build_report(run_dir, out)
    console_err.print(f"wrote {res.html} ({len(res.pngs)} plot(s))")
    for p in res.pngs:
        console.print(str(p), highlight=False)


def register(app: typer.Typer) -> None:
    app.command("view")(view)
    app.command("report")(report)
