"""Reading foreign log files defensively: JSONL line by line with unreadable and truncated lines\ncounted (``ImportStats``), the head of a file for sniffing, empty files refused."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from itertools import islice
from typing import Any

import orjson

from ..core.errors import LoadError
from ..core.limits import check_text, needs_exact_check
from ..core.read import iter_lines, open_read, split_format

# ---------------------------------------------------------------- reading JSONL defensively


class ImportStats:
    """What an importer saw and skipped, reported into ``metadata["import"]``."""

    def __init__(self) -> None:
        self.records: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self.bad_lines: list[int] = []
        self.truncated = False
        self.damaged_after: int | None = None  # a compressed stream that breaks after this line
        self.notes: list[str] = []
        self.bad_values: Counter[str] = Counter()  # values of the wrong type or range, not read

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"records": dict(self.records)}
        if self.unknown:
            d["unknown_records"] = dict(self.unknown)
        if self.bad_lines:
            d["bad_lines"] = self.bad_lines[:50]
            d["bad_line_count"] = len(self.bad_lines)
        if self.truncated:
            d["truncated"] = True
        if self.damaged_after is not None:
            d["compressed_stream_damaged_after_line"] = self.damaged_after
        if self.notes:
            d["notes"] = self.notes[:50]
        if self.bad_values:
            d["bad_values"] = dict(self.bad_values)
        return d


def iter_jsonl(path: str | os.PathLike[str], stats: ImportStats) -> Iterator[tuple[int, Any]]:
    """(line, object) of a JSONL file; bad lines are counted, a cut-off last line marks truncation.
    A damaged compressed stream is OT007 when it yields no line; after some lines it ends the
    records, noted in ``stats.damaged_after`` (what was read is kept, and said to be partial)."""
    p = os.fspath(path)
    pending: int | None = None
    lines, exact = _plain_lines(p)
    for n, line in lines if lines is not None else _lines_until_damage(p, stats):
        if not line.strip():
            continue
        if pending is not None:
            stats.bad_lines.append(pending)
            pending = None
        if n == 1:
            line = without_bom(line)
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            pending = n
            continue
        if exact and needs_exact_check(line) and check_text(line) is not None:
            stats.bad_values["record beyond the input limits"] += 1
            continue
        yield n, obj
    if pending is not None:
        stats.bad_lines.append(pending)
        stats.truncated = True


def _plain_lines(p: str) -> tuple[Iterator[tuple[int, bytes]] | None, bool]:
    """An uncompressed log is read whole (session logs are kilobytes to megabytes) and scanned
    once for long integers: (numbered lines, whether a line may need the exact check). A
    compressed one or a large one is streamed (None)."""
    if split_format(p)[1] is not None or not os.path.isfile(p) or os.path.getsize(p) > _WHOLE_FILE_BYTES:
        return None, True
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError:
        return None, True  # the streaming reader reports it
    return enumerate(data.split(b"\n"), 1), needs_exact_check(data)


_WHOLE_FILE_BYTES = 64 << 20


def _lines_until_damage(p: str, stats: ImportStats) -> Iterator[tuple[int, bytes]]:
    last = 0
    try:
        for last, line in iter_lines(p):  # noqa: B007 - last is read after a failure
            yield last, line
    except LoadError as e:
        if e.code != "OT007" or last == 0:
            raise
        stats.damaged_after = last


def require_nonempty(path: str | os.PathLike[str]) -> None:
    """Raise OT006 for an empty (or whitespace-only) file, so callers can report and continue."""
    p = os.fspath(path)
    try:
        size = os.path.getsize(p)
    except OSError as e:
        raise LoadError("OT001", f"cannot read: {e.strerror}", path=p) from None
    if size == 0:
        raise LoadError("OT006", "empty file: nothing to import", path=p)
    if size < 4096:
        with open(p, "rb") as f:
            if not f.read().strip():
                raise LoadError("OT006", "empty file (whitespace only): nothing to import", path=p)


def head_bytes(path: str | os.PathLike[str], n: int = 65536) -> bytes:
    """The first ``n`` bytes of a log's content, decompressed (``.gz``, ``.zst``), for sniffing;
    empty when the file cannot be read."""
    try:
        with open_read(os.fspath(path)) as f:
            return without_bom(f.read(n))
    except Exception:  # noqa: BLE001 - OSError, a corrupt stream (zlib.error, ZstdError): no head
        return b""


def without_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark (Windows editors write one; it carries
    no meaning, and left in it made the first record of a log unreadable)."""
    return data[3:] if data[:3] == b"\xef\xbb\xbf" else data


_LINE = re.compile(rb"[^\r\n]+")  # the non-empty lines of bytes.splitlines(): \n, \r, \r\n end one


def first_json_lines(path: str | os.PathLike[str], k: int = 5) -> list[Any]:
    """Up to ``k`` decoded leading lines of a JSONL file (for sniffing); undecodable lines skipped."""
    return list(islice(iter_head_json(path), k))


def iter_head_json(path: str | os.PathLike[str]) -> Iterator[Any]:
    """Decoded lines of a JSONL file's first 64 KB, one at a time (a sniffer that decides on the
    first record decodes only that one); undecodable lines skipped. Lines are found as they are
    asked for: splitting all 64 KB up front (and freeing the pieces) cost more than the sniffing."""
    for m in _LINE.finditer(head_bytes(path)):
        line = m.group()
        if not line.strip():
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
