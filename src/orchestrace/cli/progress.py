"""A progress bar for commands that stream many traces (analyze, credit).

It goes to stderr, disappears when done, and stays off for small inputs, with ``--quiet`` and when
stderr is not a terminal (rich would draw nothing there but an empty line when it stops).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from ..core.errors import OrchestraceError
from ..core.model import Trace
from .inputs import expand_paths, explain_foreign
from .output import console_err

T = TypeVar("T")

#: fewer traces than this: no bar (it would only flicker)
MIN_TRACES = 100
_CHUNK = 1 << 22


def count_traces(files: Iterable[str]) -> int | None:
    """Traces in plain ``.json`` (one each) and ``.jsonl`` files (one per line); None when
    an input cannot be counted cheaply (compressed, event logs, stores, stdin)."""
    n = 0
    for f in files:
        low = f.lower()
        if low.endswith(".json"):
            n += 1
        elif low.endswith(".jsonl") and not low.endswith(".events.jsonl") and os.path.isfile(f):
            n += _lines(f)
        else:
            return None
    return n


def _lines(path: str) -> int:
    n = 0
    last = b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            n += chunk.count(b"\n")
            last = chunk[-1:]
    return n + (last != b"\n")


def tracked(
    items: Iterable[T], *, label: str, total: int | None, quiet: bool = False, console: Console = console_err
) -> Iterator[T]:
    """Yield ``items`` while a bar counts them (of ``total`` when known). rich.progress is
    imported here: every command's start-up paid 10-15 ms for it (``python -X importtime``)."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    off = quiet or not console.is_interactive or (total is not None and total < MIN_TRACES)
    columns = (
        TextColumn(f"[bold]{label}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("traces"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, disable=off, transient=True) as bar:
        task = bar.add_task(label, total=total)
        for x in items:
            yield x
            bar.advance(task)


def stream_traces(
    paths: list[str], label: str, *, quiet: bool = False, source: list[str] | None = None
) -> Iterator[Trace]:
    """Traces of files, directories, globs or stores, one at a time, with a bar when there are many.
    ``source``, when given, holds the file of the trace last yielded, for an error about it."""
    from ..store import traces_of

    files = list(expand_paths(paths))

    def traces() -> Iterator[Trace]:
        for p in files:
            for tr in traces_of(p):
                if source is not None:
                    source[:] = [p]
                yield tr

    return tracked(traces(), label=label, total=count_traces(files), quiet=quiet)


def stream_file_traces(
    paths: list[str], label: str, failed: dict[int, OrchestraceError], *, quiet: bool = False
) -> Iterator[tuple[int, Trace]]:
    """Traces of each file with the file's index, one at a time. A file that cannot be loaded
    (bad input, unreadable) is reported on stderr, recorded in ``failed`` under its index, and
    the stream goes on with the next file: one bad file does not hide the others' outcomes.
    Traces a file yielded before it failed carry its index, for the caller to drop."""
    from ..store import traces_of

    files = list(expand_paths(paths))

    def traces() -> Iterator[tuple[int, Trace]]:
        for i, p in enumerate(files):
            try:
                for tr in traces_of(p):
                    yield i, tr
            except OrchestraceError as e:
                note_failed_file(failed, i, p, e)

    return tracked(traces(), label=label, total=count_traces(files), quiet=quiet)


def note_failed_file(failed: dict[int, OrchestraceError], index: int, path: str, e: OrchestraceError) -> None:
    """Record file ``index`` as failed and say why on stderr, one line as main() would."""
    e.path = e.path or path
    failed[index] = explain_foreign(e)
    console_err.print(f"[red]{escape(str(e))}[/red]", highlight=False, soft_wrap=True)


def failure_exit_code(failed: dict[int, OrchestraceError]) -> int:
    """2 when a file could not be read (as validate exits on OT001), else 1 (bad input)."""
    return max(e.exit_code for e in failed.values())
