"""The import formats by name: the built-in importer modules, those registered under the
``orchestrace.importers`` entry-point group, and which one reads a file (``detect``)."""

from __future__ import annotations

import importlib
import os
import sys
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from ..core.errors import OrchestraceError

#: format name -> module, in detection order (most specific first)
IMPORTERS: dict[str, str] = {
    "claude-code": "orchestrace.importers.claude_code",
    "codex": "orchestrace.importers.codex",
    "gemini-cli": "orchestrace.importers.gemini_cli",
    "opencode": "orchestrace.importers.opencode",
    "otel": "orchestrace.importers.otlp",  # OTLP/JSON spans; the format keeps its name
    "openai-agents": "orchestrace.importers.openai_agents",
    "who-and-when": "orchestrace.importers.whowhen",
    "chatdev": "orchestrace.importers.chatdev",
}

#: file-name endings each built-in format can have; ``detect`` imports a module only when the
#: name fits (a plug-in's module is always asked: we cannot know its endings without importing it)
SUFFIXES: dict[str, tuple[str, ...]] = {
    "claude-code": (".jsonl",),
    "codex": (".jsonl",),
    "gemini-cli": (".json", ".jsonl"),
    "opencode": (".json",),
    "otel": (".json", ".jsonl"),
    "openai-agents": (".json", ".jsonl"),
    "who-and-when": (".json", ".json.gz", ".json.zst"),
    "chatdev": (".log",),
}

_cache: dict[str, Any] = {}


def _targets() -> dict[str, str]:
    """Built-in and plug-in formats. Scanning installed distributions for entry points takes ~40 ms
    and ``detect`` runs once per file, so the scan is cached per ``sys.path``."""
    return _scan(tuple(sys.path))


@cache
def _scan(_sys_path: tuple[str, ...]) -> dict[str, str]:
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
    """The first format whose ``sniff`` accepts the file, or None. Formats whose file-name endings
    do not fit are skipped before their module is imported."""
    p = os.fspath(path)
    for name in _targets():
        suffixes = SUFFIXES.get(name)
        if suffixes is not None and not p.endswith(suffixes):
            continue
        try:
            if get(name).sniff(p):
                return name
        except (OSError, ImportError, ValueError):
            continue
    return None
