"""The ``orchestrace`` command line: a thin layer over the packages; no logic of its own.

Each ``cmd_*.py`` module in this package defines ``register(app)`` and is picked up here, so a
new command group is one new file.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
import sys
from typing import TYPE_CHECKING

import typer

from ..core.errors import OrchestraceError
from .inputs import explain_foreign
from .output import console_err

if TYPE_CHECKING:
    import click  # typer builds on its own copy of click; this one is only the annotation's

app = typer.Typer(
    name="orchestrace",
    help="Record, validate, measure, reward, credit and learn from multi-agent orchestration traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from .. import __version__

        typer.echo(f"orchestrace {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Record, validate, measure, reward, credit and learn from multi-agent orchestration traces."""


def _register_all() -> None:
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("cmd_"):
            importlib.import_module(f"{__name__}.{info.name}").register(app)
    _one_line_summaries(app)


def _one_line_summaries(group: typer.Typer) -> None:
    """Command lists show the first paragraph of each docstring; typer keeps its source line
    breaks there, so the list wraps mid-sentence. Give every command that paragraph as one line."""
    for cmd in group.registered_commands:
        doc = cmd.help or (cmd.callback.__doc__ if cmd.callback else None)
        if cmd.short_help is None and doc:
            cmd.short_help = " ".join(doc.strip().split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _one_line_summaries(sub.typer_instance)


_register_all()


@functools.cache
def _command() -> click.Command:
    """The click command behind ``app``, built once (typer rebuilds it on every call)."""
    return typer.main.get_command(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: a user error is one line on stderr and exit 1 (bad input) or 2 (usage, I/O;
    typer's own usage errors too, instead of its boxed usage text);
    anything else is a bug in orchestrace: one line, a hint to report it, exit 3.
    ``ORCHESTRACE_DEBUG=1`` shows the traceback of a bug instead."""
    from rich.markup import escape  # messages quote user input, which may hold [brackets]

    try:
        code = _command().main(args=argv, prog_name="orchestrace", standalone_mode=False)
    except typer.TyperException as e:  # usage: a missing or unknown option, a bad value, no such command
        if type(e).__name__ != "NoArgsIsHelpError":  # that one has printed the help already
            ctx = getattr(e, "ctx", None)
            where = ctx.command_path if ctx is not None else "orchestrace"
            console_err.print(
                f"[red]{escape(where)}: {escape(e.format_message())}[/red] ({escape(where)} -h for help)",
                highlight=False,
                soft_wrap=True,
            )
        sys.exit(e.exit_code)
    except typer.Abort:
        console_err.print("[yellow]aborted[/yellow]")
        sys.exit(1)
    except OrchestraceError as e:
        console_err.print(f"[red]{escape(str(explain_foreign(e)))}[/red]", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        console_err.print("[yellow]interrupted[/yellow]")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except Exception as e:  # noqa: BLE001 - the one place a bug becomes a message, not a traceback
        if os.environ.get("ORCHESTRACE_DEBUG"):
            raise
        what = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        console_err.print(
            f"[red]internal error: {escape(what)}[/red] (a bug in orchestrace, not in your input: "
            "please report it with the command line; ORCHESTRACE_DEBUG=1 shows the traceback)",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(3)
    sys.exit(code if isinstance(code, int) else 0)  # typer.Exit(n) comes back as n
