"""What the commands read: trace files named, under folders (``core.paths.walk_dir``) or matched by\na glob, and the foreign agent logs to point to ``orchestrace import`` instead."""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator

import orjson

from ..core.errors import OrchestraceError
from ..core.paths import glob_paths, walk_dir
from .output import console_err

TRACE_SUFFIXES = (".json", ".jsonl", ".events.jsonl")


STORE_SUFFIXES = (".duckdb", ".db")  # a DuckDB store (store.is_store_path), read without importing the store


COMPRESSED = ("", ".gz", ".zst")


def is_trace_file(name: str) -> bool:
    low = name.lower()
    return any(low.endswith(s + c) for s in TRACE_SUFFIXES for c in COMPRESSED)


CALL_CACHE_SUFFIX = ".cache.jsonl"  # the runtime's call cache beside each recorded trace


def looks_like_trace(path: str) -> bool:
    """Whether a file met while walking a folder can be a trace: not a runtime call cache, and
    (``.jsonl``) a first line that is a trace or an event-log header, or (``.json``) a text
    that mentions ``"events"``, which every trace has. Policies, reports and call caches beside
    the traces are skipped (a JSON object without ``events``); an unreadable or unparsable file
    is kept so validation reports it."""
    from ..core.read import open_read, split_format

    if any(path.lower().endswith(CALL_CACHE_SUFFIX + c) for c in COMPRESSED):
        return False
    try:
        fmt, _ = split_format(path)
        with open_read(path) as f:
            if fmt == "json":
                data = f.read()
                if b'"events"' in data:
                    return True
                try:
                    return not isinstance(orjson.loads(data), dict)
                except orjson.JSONDecodeError:
                    return True
            first = b""
            while not first.strip():
                first = f.readline()
                if not first:
                    return True  # empty: let validation say so
    except Exception:  # noqa: BLE001 - zlib.error, ZstdError, EOFError...: a file this cannot read
        return True  # is kept, so that validation reports it (OT007), and the walk goes on
    try:
        rec = orjson.loads(first)
    except orjson.JSONDecodeError:
        return True
    return not isinstance(rec, dict) or "events" in rec or "trace_id" in rec or rec.get("rec") == "header"


def foreign_log(path: str | None) -> str | None:
    """When a file given where a trace belongs is an agent log that ``orchestrace import`` reads
    (a Claude Code session, a Codex rollout, ...), the one line that says so and how to import
    it; else None. Asked only of files that failed as traces, so a valid trace never pays for it."""
    if not path or path == "-" or not os.path.isfile(path):
        return None
    from ..importers import detect

    fmt = detect(path)
    if fmt is None:
        return None
    return f"a {fmt} log, not an orchestration trace: import it first (orchestrace import {shlex.quote(path)} -o traces.jsonl)"


def explain_foreign(e: OrchestraceError) -> OrchestraceError:
    """``e`` with its message replaced by :func:`foreign_log`'s line when its file is a foreign
    agent log: "missing required field 'trace_id'" does not tell a new user what to do."""
    if (e.code == "OT003" or e.code.startswith("OT1")) and (hint := foreign_log(e.path)):
        e.message = hint
        e.line = e.pointer = None
    return e


def expand_paths(paths: list[str]) -> Iterator[str]:
    """Files, directories (walked for trace files, sorted) and globs; ``-`` is stdin. Files in a
    walked folder that are not traces (call caches, policies, reports) are skipped, with one line
    per folder saying how many."""
    for p in paths:
        if p == "-":
            yield p
        elif os.path.isdir(p):
            found = False
            skipped = 0
            for full in walk_dir(p):
                if not is_trace_file(os.path.basename(full)):
                    continue
                if not looks_like_trace(full):
                    skipped += 1
                    continue
                found = True
                yield full
            if skipped:
                console_err.print(
                    f"{p}: skipped {skipped} file(s) that are not traces (call caches, policies, reports)",
                    highlight=False,
                )
            if not found:
                raise OrchestraceError(
                    "OT001", "directory holds no trace files (.json, .jsonl, .events.jsonl)", path=p
                )
        elif any(ch in p for ch in "*?[") and not os.path.exists(p):  # a file named a[1].json is a file
            matches = glob_paths(p)
            if not matches:
                raise OrchestraceError("OT001", "glob matches no file", path=p)
            yield from matches
        else:
            yield p
