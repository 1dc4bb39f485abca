"""Importers: foreign agent logs in, orchestration traces out. One module per format.

Each importer module has ``NAME``, ``sniff(path) -> bool`` and
``load(path, *, keep_content=False) -> Iterator[Trace]``; optionally ``covered(path) -> bool``
(the file is imported as part of another one, e.g. a Claude Code sub-agent log beside its
session). Third parties register more under the ``orchestrace.importers`` entry-point group
(value ``"package.module"`` or ``"package.module:object"`` with the same attributes).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from typing import Any

from ..core.errors import OrchestraceError
from ..core.model import Trace

#: format name -> module, in detection order (most specific first)
IMPORTERS: dict[str, str] = {
    "claude-code": "orchestrace.importers.claude_code",
    "codex": "orchestrace.importers.codex",
    "gemini-cli": "orchestrace.importers.gemini_cli",
    "opencode": "orchestrace.importers.opencode",
    "otel": "orchestrace.importers.otel",
    "openai-agents": "orchestrace.importers.openai_agents",
    "who-and-when": "orchestrace.importers.whowhen",
    "chatdev": "orchestrace.importers.chatdev",
}

_cache: dict[str, Any] = {}


def _targets() -> dict[str, str]:
    targets = dict(IMPORTERS)
    for ep in entry_points(group="orchestrace.importers"):
        targets.setdefault(ep.name, ep.value)
    return targets


def names() -> list[str]:
    return list(_targets())


def get(name: str) -> Any:
    """The importer module (or object) registered under ``name``."""
    if name in _cache:
        return _cache[name]
    targets = _targets()
    if name not in targets:
        raise OrchestraceError("OT021", f"unknown import format {name!r}; known: {', '.join(targets)}")
    mod_name, _, attr = targets[name].partition(":")
    obj: Any = importlib.import_module(mod_name)
    if attr:
        obj = getattr(obj, attr)
    _cache[name] = obj
    return obj


def detect(path: str | os.PathLike[str]) -> str | None:
    """The first format whose ``sniff`` accepts the file, or None."""
    for name in _targets():
        try:
            if get(name).sniff(path):
                return name
        except (OSError, ImportError, ValueError):
            continue
    return None


def walk(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files named and files under directories named (sorted, hidden entries skipped)."""
    out: list[str] = []
    for p in paths:
        p = os.fspath(p)
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
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
    path: str | os.PathLike[str], fmt: str | None = None, *, keep_content: bool = False
) -> Iterator[Trace]:
    """Traces of one file in a named or detected format."""
    name = fmt or detect(path)
    if name is None:
        raise OrchestraceError(
            "OT022",
            f"cannot tell the log format; name it with --from ({', '.join(names())})",
            path=os.fspath(path),
        )
    yield from get(name).load(path, keep_content=keep_content)
