"""What an import reads: the files named or under folders named (``walk``), the format of each
(``plan``), and the traces of one file (``load``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator

from ..core.errors import BadInput, OrchestraceError
from ..core.model import Trace
from ..core.paths import walk_dir
from .registry import detect, get, names


def walk(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files named and files under directories named (sorted, hidden entries skipped)."""
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            out.extend(walk_dir(p))
        elif os.path.exists(p):
            out.append(p)
        else:
            raise OrchestraceError("OT001", "no such file or directory", path=p)
    return out


Notify = Callable[[str, str, str], None]  # (path, level, message)


def plan(
    files: list[str],
    fmt: str | None = None,
    notify: Notify | None = None,
    explicit: frozenset[str] = frozenset(),
) -> list[tuple[str, str]]:
    """(path, format) for every file to import. Files nothing recognises are left out: reported
    when empty or named explicitly, silently when found by walking a directory."""
    planned: list[tuple[str, str]] = []
    for f in files:
        try:
            empty = os.path.getsize(f) == 0
        except OSError:
            empty = False
        name = fmt or detect(f)
        if name is None:
            if notify and empty:
                notify(f, "warn", "empty file, skipped")
            elif notify and f in explicit:
                notify(f, "warn", f"unknown log format, skipped (name it with --from: {', '.join(names())})")
            continue
        mod = get(name)
        cov = getattr(mod, "covered", None)
        if cov is not None and cov(f):
            continue
        planned.append((f, name))
    return planned


def load(
    path: str | os.PathLike[str],
    fmt: str | None = None,
    *,
    keep_content: bool = False,
    keep_home_paths: bool = False,
) -> Iterator[Trace]:
    """Traces of one file in a named or detected format; the home directory in the metadata's
    working directory becomes ``~`` (it names the user) unless ``keep_home_paths``."""
    from .redact import tilde_home

    name = fmt or detect(path)
    if name is None:  # the file's content, not the call: bad input (exit 1)
        raise BadInput(
            "OT022",
            f"cannot tell the log format; name it with --from ({', '.join(names())})",
            path=os.fspath(path),
        )
    for tr in get(name).load(path, keep_content=keep_content):
        if not keep_home_paths:
            tilde_home(tr.metadata)
        yield tr
