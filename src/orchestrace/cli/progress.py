"""A progress bar for commands that stream many traces (analyze, credit).

It goes to stderr, disappears when done, and stays off for small inputs, with ``--quiet`` and when
stderr is not a terminal (rich draws nothing then).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..core.model import Trace
from .common import console_err, expand_paths

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
    """Yield ``items`` while a bar counts them (of ``total`` when known)."""
    off = quiet or (total is not None and total < MIN_TRACES)
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


def stream_traces(paths: list[str], label: str, *, quiet: bool = False) -> Iterator[Trace]:
    """Traces of files, directories, globs or stores, one at a time, with a bar when there are many."""
    from ..store import traces_of

    files = list(expand_paths(paths))
    traces = (tr for p in files for tr in traces_of(p))
    return tracked(traces, label=label, total=count_traces(files), quiet=quiet)
