"""``orchestrace import``: foreign agent logs in, validated traces out."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.markup import escape

from ..core.errors import BadInput, OrchestraceError
from .output import console, console_err

_EPILOG = """\
Examples:

  orchestrace import ~/.claude/projects -o claude.jsonl
  orchestrace import --from codex rollout-2026-05-11.jsonl -o codex.json
  orchestrace import "../shared/data/who-and-when" -o whowhen.jsonl.zst --keep-content
  orchestrace import spans.otlp.json -o otel.jsonl
  orchestrace import ~/.claude/projects -o claude.jsonl --workers 1   # all in this process

Formats: claude-code, codex, gemini-cli, opencode, otel (OTLP JSON), openai-agents, who-and-when, chatdev.
Content is stored only as a sha256 content_ref unless --keep-content (secrets redacted).
Home directories in metadata cwd become ~ unless --keep-home-paths.
"""


def register(app: typer.Typer) -> None:
    @app.command("import", epilog=_EPILOG)
    def import_(
        paths: list[str] = typer.Argument(..., help="Log files or directories (walked)."),
        out: str = typer.Option(
            ..., "-o", "--out", help="Output trace file (.json, .jsonl, .events.jsonl; .gz/.zst)."
        ),
        fmt: str | None = typer.Option(None, "--from", help="Log format; detected per file when omitted."),
        keep_content: bool = typer.Option(
            False, "--keep-content", help="Store message/tool content (secrets redacted)."
        ),
        keep_home_paths: bool = typer.Option(
            False, "--keep-home-paths", help="Keep home directories in metadata cwd (default: ~)."
        ),
        quiet: bool = typer.Option(False, "-q", "--quiet", help="No progress bar."),
        workers: int | None = typer.Option(
            None,
            "--workers",
            min=1,
            help="Processes importing files, this one included; it alone writes, in input order. "
            "Default: one per CPU other jobs leave free (1-minute load average), for a .jsonl output "
            "and 4 MB of logs or more. 1: no other process; at most 4 per CPU.",
        ),
    ) -> None:
        """Import agent logs (Claude Code, Codex, Gemini CLI, opencode, OTel GenAI, OpenAI Agents SDK, Who&When, ChatDev)."""
        from .. import importers

        if fmt is not None:
            importers.get(fmt)  # unknown names fail before any work

        def notify(path: str, level: str, msg: str) -> None:
            colour = "yellow" if level == "warn" else "red"
            console_err.print(f"[{colour}]{level}[/{colour}] {path}: {msg}", highlight=False, soft_wrap=True)

        explicit = frozenset(p for p in paths if os.path.isfile(p))
        files = importers.walk(paths)
        planned = importers.plan(files, fmt, notify, explicit)
        if not planned:  # files no importer recognises are bad input (exit 1); no file at all, 2
            raise (BadInput if files else OrchestraceError)(
                "OT022", "no importable log found (name the format with --from?)", path=" ".join(paths)
            )
        report = importers.Report()
        from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

        with Progress(
            TextColumn("[bold]import[/bold]"),
            BarColumn(),
            TaskProgressColumn(),
            TimeRemainingColumn(),
            console=console_err,
            disable=quiet or len(planned) < 2 or not console_err.is_interactive,
            transient=True,
        ) as bar:
            task = bar.add_task("import", total=sum(_size(f) for f, _ in planned) or 1)
            importers.import_files(
                planned,
                out,
                keep_content=keep_content,
                keep_home_paths=keep_home_paths,
                notify=notify,
                report=report,
                done=lambda f: bar.advance(task, _size(f)),
                workers=workers,
            )
        if not report.traces:
            if out != "-":
                Path(out).unlink(missing_ok=True)
            raise BadInput(  # the inputs' content, as validate exits on an empty trace file
                "OT006",
                "nothing imported: every input was empty or held no log of the format (see above)",
                path=" ".join(paths),
            )
        summary = ", ".join(f"{n} {k}" for k, n in report.per_format.items())
        (console_err if out == "-" else console).print(
            f"imported {report.traces} trace(s) ({summary}) -> {out}", highlight=False
        )
        if report.unknown:
            top = ", ".join(f"{k}: {n}" for k, n in report.unknown.most_common(8))
            console_err.print(
                f"[yellow]note[/yellow] unknown record types skipped: {escape(top)}", highlight=False
            )
        if report.failed:
            raise typer.Exit(1)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
