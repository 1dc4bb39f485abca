"""Shared CLI helpers: consoles, path expansion, exit codes."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterator

from rich.console import Console

from ..core.errors import OrchestraceError


def _console(*, stderr: bool = False) -> Console:
    """A console that, when piped (not a terminal), is wide enough that tables keep full ids and
    headers instead of cutting them to 80 columns."""
    c = Console(stderr=stderr, soft_wrap=True)
    if not c.is_terminal:
        c.width = PIPED_WIDTH
    return c


PIPED_WIDTH = 10_000
console = _console()
console_err = _console(stderr=True)

TRACE_SUFFIXES = (".json", ".jsonl", ".events.jsonl")
COMPRESSED = ("", ".gz", ".zst")


def is_trace_file(name: str) -> bool:
    low = name.lower()
    return any(low.endswith(s + c) for s in TRACE_SUFFIXES for c in COMPRESSED)


def expand_paths(paths: list[str]) -> Iterator[str]:
    """Files, directories (walked for trace files, sorted) and globs; ``-`` is stdin."""
    for p in paths:
        if p == "-":
            yield p
        elif os.path.isdir(p):
            found = False
            for root, dirs, files in os.walk(p):
                dirs.sort()
                for f in sorted(files):
                    if is_trace_file(f):
                        found = True
                        yield os.path.join(root, f)
            if not found:
                raise OrchestraceError(
                    "OT001", "directory holds no trace files (.json, .jsonl, .events.jsonl)", path=p
                )
        elif any(ch in p for ch in "*?[") and not os.path.exists(p):  # a file named a[1].json is a file
            matches = sorted(glob.glob(p, recursive=True))
            if not matches:
                raise OrchestraceError("OT001", "glob matches no file", path=p)
            yield from matches
        else:
            yield p
