"""Reading traces without validating them: formats, decompression, JSON parsing (with the input
limits and duplicate-key detection), and the ``.events.jsonl`` log read record by record.

Every format may be gzip (``.gz``) or zstd (``.zst``) compressed; the extension decides.

The event log is what a running system appends to: a header line with the trace's top-level
fields, then one record per line (``"rec"`` is ``event``, ``edge`` or ``update``; an update merges
rewards/costs/metrics/metadata known only at the end of a run). It can be read record by record
without holding the whole trace. ``validate`` checks what this module reads; ``io`` loads
validated traces on top of both.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Literal, NamedTuple

import msgspec
import orjson

from .errors import LoadError
from .limits import MAX_DEPTH, MAX_STRING_CHARS, LimitViolation, check_text, needs_exact_check
from .model import TRACE_OBJECT_FIELDS, Trace, derived_costs, trace_from_dict

Format = Literal["json", "jsonl", "events"]
#: what a damaged gzip stream raises (zlib.error is no OSError)
_CORRUPT = (EOFError, gzip.BadGzipFile, zlib.error, OSError)
Compression = Literal["gz", "zst", None]

REC = "rec"


def split_format(path: str | os.PathLike[str]) -> tuple[Format, Compression]:
    """Format and compression of a path, from its extension."""
    name = os.fspath(path).lower()
    comp: Compression = None
    if name.endswith(".gz"):
        comp, name = "gz", name[:-3]
    elif name.endswith(".zst"):
        comp, name = "zst", name[:-4]
    if name.endswith(".events.jsonl"):
        return "events", comp
    if name.endswith(".jsonl"):
        return "jsonl", comp
    return "json", comp


# ---------------------------------------------------------------- byte streams


def open_read(path: str | os.PathLike[str]) -> IO[bytes]:
    """A binary stream of the decompressed content; ``-`` is stdin."""
    p = os.fspath(path)
    if p == "-":
        return sys.stdin.buffer
    _, comp = split_format(p)
    try:
        raw = open(p, "rb")  # noqa: SIM115 - caller closes
    except FileNotFoundError:
        raise LoadError("OT001", "file not found", path=p) from None
    except IsADirectoryError:
        raise LoadError("OT001", "is a directory, expected a trace file", path=p) from None
    except OSError as e:
        raise LoadError("OT001", f"cannot read: {e.strerror}", path=p) from None
    if comp == "gz":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if comp == "zst":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=True)  # type: ignore[return-value]
    return raw


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    p = os.fspath(path)
    with open_read(p) as f:
        try:
            return f.read()
        except _CORRUPT as e:
            raise LoadError("OT007", f"corrupt or truncated compressed data ({e})", path=p) from None
        except Exception as e:  # zstandard.ZstdError
            if type(e).__name__ == "ZstdError":
                raise LoadError("OT007", f"corrupt or truncated zstd data ({e})", path=p) from None
            raise


def iter_lines(path: str | os.PathLike[str], *, tolerant: bool = False) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, line bytes) of a possibly compressed file, streamed.

    With ``tolerant`` a truncated compressed stream ends the iteration instead of raising.
    """
    p = os.fspath(path)
    f = open_read(p)
    try:
        n = 0
        buf = io.BufferedReader(f, buffer_size=1 << 20) if not isinstance(f, io.BufferedReader) else f
        while True:
            try:
                line = buf.readline()
            except _CORRUPT as e:
                if tolerant:
                    return
                raise LoadError(
                    "OT007", f"corrupt or truncated compressed data ({e})", path=p, line=n + 1
                ) from None
            except Exception as e:
                if type(e).__name__ == "ZstdError":
                    if tolerant:
                        return
                    raise LoadError(
                        "OT007", f"corrupt or truncated zstd data ({e})", path=p, line=n + 1
                    ) from None
                raise
            if not line:
                return
            n += 1
            yield n, line
    finally:
        if p != "-":
            f.close()


# ---------------------------------------------------------------- JSON parsing


def parse_json(data: bytes, *, path: str | None = None, line: int | None = None) -> Any:
    """orjson.loads with errors that say what is wrong and where (OT002-OT006), and the
    limits of ``core.limits`` (OT008) enforced, so every reader of a document agrees."""
    if data[:3] == b"\xef\xbb\xbf":  # a UTF-8 byte-order mark carries no meaning; accept one
        data = data[3:]
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if needs_exact_check(data) and (over := check_text(data)) is not None:
            raise limit_error(over, path, line) from None
        raise _json_error(e, data, path, line) from None
    if needs_exact_check(data) and (over := check_text(data)) is not None:
        raise limit_error(over, path, line)
    return value


def limit_error(over: LimitViolation, path: str | None, line: int | None) -> LoadError:
    """A ``core.limits`` violation as a load error (OT008)."""
    return LoadError("OT008", over.message, path=path, line=line, pointer=over.pointer or None)


def _json_error(e: orjson.JSONDecodeError, data: bytes, path: str | None, line: int | None) -> LoadError:
    msg = str(e).split(": line ")[0]
    pos = e.pos
    where_line = line if line is not None else e.lineno
    head = data[pos : pos + 9] if isinstance(data, bytes | bytearray) else b""
    if line is None or not isinstance(data, bytes | bytearray):
        col = f" column {e.colno}"
    else:  # a JSONL line, parsed alone with its newline: at its end, the column after its text
        col = f" column {min(pos, len(data.decode('utf-8', 'replace').rstrip())) + 1}"
    if "depth limit" in msg:
        return LoadError(
            "OT008", f"nested deeper than {MAX_DEPTH} levels of arrays/objects", path=path, line=where_line
        )
    if "byte order mark" in msg:  # one was stripped above, so this is a second: valid UTF-8, not JSON
        return LoadError(
            "OT003",
            f"not valid JSON at{col}: a second UTF-8 byte-order mark (one at the start is accepted)",
            path=path,
            line=where_line,
        )
    if "UTF-8" in msg or "utf-8" in msg:
        return _utf8_error(data, path, line)
    if "infinity" in msg or head.lstrip(b"-").startswith((b"NaN", b"Infinity", b"inf")):
        return LoadError(
            "OT004",
            f"NaN or Infinity at{col}: JSON numbers must be finite",
            path=path,
            line=where_line,
        )
    stripped = data[pos:].strip() if isinstance(data, bytes | bytearray) else b""
    if not stripped or "EOF" in msg or "end of" in msg.lower():
        return LoadError(
            "OT006",
            f"unexpected end of input at{col}: the file looks truncated"
            + (
                " (an event log can be salvaged with `orchestrace repair`)"
                if path is not None and split_format(path)[0] == "events"
                else ""
            ),
            path=path,
            line=where_line,
        )
    return LoadError("OT003", f"not valid JSON at{col}: {msg}", path=path, line=where_line)


def _utf8_error(data: bytes, path: str | None, line: int | None) -> LoadError:
    """OT002 at the first byte that is not UTF-8: orjson reports every encoding error at
    char 0, which named line 1 of a .json file whatever line the bad byte was on."""
    try:
        data.decode("utf-8")
        at, where = None, ""  # orjson refused what Python decodes: no position to give
    except UnicodeDecodeError as u:
        at = u.start  # a byte column, as no character is known there
        if line is None:
            line = data.count(b"\n", 0, at) + 1
        column = at - data.rfind(b"\n", 0, at)
        where = f" at column {column}"
    byte = "" if at is None else f" 0x{data[at]:02x}"
    return LoadError(
        "OT002",
        f"invalid UTF-8 byte{byte}{where}: trace files must be UTF-8 encoded",
        path=path,
        line=line or 1,
    )


class _DupDict(dict):  # type: ignore[type-arg]
    dup: str | None = None


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d = _DupDict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                d.dup = k
                break
            seen.add(k)
    return d


def _same_key_count(text: bytes, parsed: Any, dumped: bytes | None = None) -> bool:
    """True when the parse kept every key of the text (so no key was duplicated).

    orjson's re-serialisation keeps every string's characters and writes one colon per key, so
    the colon count of the input equals that of the dump exactly when no key was dropped (a
    dropped key takes at least its own colon with it). An escaped colon (``\\u003a``), which
    the dump would write literally, sends the input to the exact check. ``dumped``: that dump,
    when the caller has it already (key order does not change the count).
    """
    if b"\\u003" in text:
        return False
    try:
        return text.count(b":") == (dumped if dumped is not None else orjson.dumps(parsed)).count(b":")
    except orjson.JSONEncodeError:  # nested past orjson's writer: let the exact check decide
        return False


def sorted_json(value: Any) -> bytes | None:
    """orjson's dump of a decoded value with sorted keys (the store digests it); None when
    orjson cannot write it (nested past its writer's limit)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return None


def find_duplicate_key(
    data: bytes, parsed: Any = None, dumped: bytes | None = None
) -> tuple[str, str] | None:
    """(JSON pointer of the object, key) of the first duplicated key, or None.

    orjson silently keeps the last value of a duplicated key; a silent wrong answer is worse
    than a slower check. Fast path: count the keys (see ``_same_key_count``); only when the
    counts differ, or cannot be trusted, does the stdlib parser locate the duplicate.
    """
    if parsed is not None and _same_key_count(data, parsed, dumped):
        return None
    if b'"' not in data:
        return None
    try:
        obj = json.loads(data, object_pairs_hook=_pairs_hook)
    except (ValueError, RecursionError):
        return None
    stack: list[tuple[str, Any]] = [("", obj)]
    while stack:
        ptr, o = stack.pop()
        if isinstance(o, dict):
            if getattr(o, "dup", None) is not None:
                return ptr, o.dup  # type: ignore[attr-defined]
            stack.extend((f"{ptr}/{_esc(k)}", v) for k, v in o.items() if isinstance(v, dict | list))
        elif isinstance(o, list):
            stack.extend((f"{ptr}/{i}", v) for i, v in enumerate(o) if isinstance(v, dict | list))
    return None


def _esc(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


# ---------------------------------------------------------------- raw traces (dicts)


class RawTrace(msgspec.Struct):
    """A decoded but not yet validated trace object, with where it came from."""

    data: Any
    path: str
    line: int | None = None
    event_lines: list[int] | None = None
    edge_lines: list[int] | None = None
    log_errors: list[LoadError] = msgspec.field(default_factory=list)
    duplicates: list[tuple[str, str, int | None]] = msgspec.field(default_factory=list)
    large: bool = True  # False when no line of the source is long enough to break the string limit
    canonical: bytes | None = None  # ``sorted_json(data)`` of the data as read, when asked for


def iter_raw(
    path: str | os.PathLike[str],
    *,
    tolerant: bool = False,
    check_duplicates: bool = False,
    collect_errors: bool = False,
    canonical: bool = False,
) -> Iterator[RawTrace]:
    """Decoded trace objects of a file, one per trace, without validation.

    With ``collect_errors`` a JSONL line that does not parse yields a RawTrace with ``data=None``
    and the error, so validation can go on with the next line. With ``canonical`` each trace of
    a .json or .jsonl file carries ``sorted_json`` of its data, which the duplicate-key check
    then reuses instead of a dump of its own.
    """
    p = os.fspath(path)
    if p == "-":
        opts = {"tolerant": tolerant, "check_duplicates": check_duplicates}
        with stdin_copy() as f:
            try:
                for raw in iter_raw(f, collect_errors=collect_errors, canonical=canonical, **opts):
                    raw.path = "-"
                    for e in raw.log_errors:
                        e.path = "-"
                    yield raw
            except LoadError as e:
                e.path = "-"
                raise
        return
    fmt, _ = split_format(p)
    if fmt == "events":
        yield read_event_log_raw(p, tolerant=tolerant, check_duplicates=check_duplicates)
        return
    for doc, line in iter_docs(p, fmt):
        yield raw_of_doc(
            doc,
            p,
            line,
            collect_errors=collect_errors,
            canonical=canonical,
            check_duplicates=check_duplicates,
        )


@contextmanager
def stdin_copy() -> Iterator[str]:
    """Standard input in a temporary file named for its format, which no name tells: a first line
    that is a whole JSON object makes an event log when it has "rec", else JSONL; anything else is
    one JSON document. Read as one document, a piped .jsonl or event log failed at its line 2 with
    "unexpected content after document"."""
    data = sys.stdin.buffer.read()
    first = next((line for line in data.splitlines() if line.strip()), b"")
    ext = ".json"
    if first.strip() != data.strip():
        try:
            head = orjson.loads(first[3:] if first[:3] == b"\xef\xbb\xbf" else first)
        except orjson.JSONDecodeError:
            head = None
        if isinstance(head, dict):
            ext = ".events.jsonl" if REC in head else ".jsonl"
    import tempfile  # here: start-up time (``python -X importtime``)

    with tempfile.TemporaryDirectory() as tmp:
        f = os.path.join(tmp, "stdin" + ext)
        with open(f, "wb") as out:
            out.write(data)
        yield f


def iter_docs(p: str, fmt: Format) -> Iterator[tuple[bytes, int | None]]:
    """The raw text of each trace in a .json or .jsonl file, with its line for JSONL. For stdin
    (``-``) the content decides between the two, as ``stdin_copy`` reads it."""
    if p == "-":
        with stdin_copy() as f:
            piped = split_format(f)[0]
            if piped == "events":
                raise LoadError("OT110", "an event log on stdin: give it as a .events.jsonl file", path=p)
            try:
                yield from iter_docs(f, piped)
            except LoadError as e:
                e.path = p
                raise
        return
    if fmt == "jsonl":
        empty = True
        for n, line in iter_lines(p):
            if line and not line.isspace():  # line.strip() without copying the line
                empty = False
                yield line, n
        if empty:
            raise LoadError("OT006", "empty file: expected one trace per line", path=p, line=1, pointer="")
        return
    data = read_bytes(p)
    if not data.strip():
        raise LoadError("OT006", "empty file: expected a JSON trace object", path=p, line=1, pointer="")
    yield data, None


def iter_span_docs(p: str, start: int, end: int, first_line: int) -> Iterator[tuple[bytes, int]]:
    """``iter_docs`` of bytes ``[start, end)`` of an uncompressed JSONL file, cut at line starts
    (``first_line``: the line at ``start``): the same lines, newline kept, and line numbers."""
    with open_read(p) as f:
        f.seek(start)
        data = f.read(end - start)
    pos, n, size = 0, first_line, len(data)
    while pos < size:
        nl = data.find(b"\n", pos)
        stop = size if nl < 0 else nl + 1
        line = data[pos:stop]
        if line.strip():
            yield line, n
        pos, n = stop, n + 1


class Piece(NamedTuple):
    """What one task prepares: a whole file, or bytes ``[start, end)`` of an uncompressed JSONL
    file cut at line starts, whose first line is ``first_line``."""

    path: str
    start: int = 0
    end: int | None = None
    first_line: int = 1


def split_file(path: str, piece_bytes: int) -> list[Piece]:
    """``path`` in pieces of about ``piece_bytes`` cut after a newline, so that processes share
    a large JSONL file as they share several files; any other file (compressed, .json, an event
    log, or blank: its one error is the whole file's) is one piece."""
    fmt, comp = split_format(path)
    try:
        if fmt != "jsonl" or comp or os.path.getsize(path) <= piece_bytes:
            return [Piece(path)]
        return _cut(path, piece_bytes)
    except OSError:  # preparing it reports why it cannot be read
        return [Piece(path)]


def piece_count(path: str, piece_bytes: int) -> int:
    """How many pieces ``split_file`` makes of ``path``, from its size alone (at most one off),
    without reading it."""
    fmt, comp = split_format(path)
    return max(1, -(-file_size(path) // piece_bytes)) if fmt == "jsonl" and not comp else 1


def file_size(path: str) -> int:
    """Bytes of ``path``; 0 when missing or unreadable (reading it reports that)."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _cut(path: str, piece_bytes: int) -> list[Piece]:
    """``split_file``'s pieces, reading the file once in 1 MB blocks to number the lines (a file
    of many GB is never held whole)."""
    pieces: list[Piece] = []
    blank, start, line = True, 0, 1
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        while start < size:
            f.seek(start + piece_bytes - 1)
            end = min(size, f.tell() + len(f.readline()))  # just after the next newline
            pieces.append(Piece(path, start, end, line))
            f.seek(start)
            for at in range(start, end, 1 << 20):
                block = f.read(min(1 << 20, end - at))
                line += block.count(b"\n")
                blank = blank and block.isspace()
            start = end
    return [Piece(path)] if blank else pieces


def raw_of_doc(
    doc: bytes,
    p: str,
    line: int | None,
    *,
    collect_errors: bool = False,
    canonical: bool = False,
    check_duplicates: bool = False,
) -> RawTrace:
    """One document of ``iter_docs`` decoded (see ``iter_raw`` for the options); a JSONL line
    that does not parse is a RawTrace holding the error when ``collect_errors``."""
    try:
        raw = RawTrace(
            parse_json(doc, path=p, line=line),
            p,
            line=line,
            large=len(doc) > MAX_STRING_CHARS,
        )
    except LoadError as e:
        if not collect_errors or line is None:
            raise
        return RawTrace(None, p, line=line, log_errors=[e])
    if canonical:
        raw.canonical = sorted_json(raw.data)
    if check_duplicates and (dup := find_duplicate_key(doc, raw.data, raw.canonical)):
        raw.duplicates.append((dup[0], dup[1], line))
    return raw


def iter_log_records(
    path: str | os.PathLike[str],
    *,
    tolerant: bool = False,
    check_duplicates: bool = False,
    dups: list[tuple[str, str, int | None]] | None = None,
    longest: list[int] | None = None,
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line, record) of an event log, streamed. ``tolerant`` skips a bad or truncated line.
    ``longest``, when given, holds the length of the longest line read so far."""
    p = os.fspath(path)
    seen = {"event": 0, "edge": 0}  # records of each kind so far: a limit's pointer says which
    for n, line in iter_lines(p, tolerant=tolerant):
        if not line.strip():
            continue
        if longest is not None and len(line) > longest[0]:
            longest[0] = len(line)
        try:
            rec = parse_json(line, path=p, line=n)
        except LoadError as e:
            if tolerant:
                continue
            if e.pointer and (m := _REC_KIND.match(line)):  # the record's pointer, made the trace's
                kind = m.group(1).decode()
                e.pointer = f"/{kind}s/{seen[kind]}{e.pointer}"
            raise
        if isinstance(rec, dict) and rec.get(REC) in ("event", "edge"):
            seen[rec[REC]] += 1
        if check_duplicates and dups is not None and (dup := find_duplicate_key(line, rec)):
            dups.append((dup[0], dup[1], n))
        if not isinstance(rec, dict):
            if tolerant:
                continue
            raise LoadError(
                "OT102", f"expected a JSON object per line, got {type(rec).__name__}", path=p, line=n
            )
        yield n, rec


_REC_KIND = re.compile(rb'^\s*\{\s*"rec"\s*:\s*"(event|edge)"')


def read_event_log_raw(path: str, *, tolerant: bool = False, check_duplicates: bool = False) -> RawTrace:
    """Assemble an event log into one trace object, remembering each record's line."""
    top: dict[str, Any] = {}
    events: list[Any] = []
    edges: list[Any] = []
    ev_lines: list[int] = []
    ed_lines: list[int] = []
    errors: list[LoadError] = []
    saw_header = False
    dups: list[tuple[str, str, int | None]] = []
    longest = [0]
    records = iter_log_records(
        path, tolerant=tolerant, check_duplicates=check_duplicates, dups=dups, longest=longest
    )
    for n, rec in records:
        kind = rec.pop(REC, None)
        if dups and dups[-1][2] == n:  # the record's own pointer, made one into the trace
            at = {"event": f"/events/{len(events)}", "edge": f"/edges/{len(edges)}"}.get(kind, "")
            dups[-1] = (at + dups[-1][0], *dups[-1][1:])
        if kind == "event":
            events.append(rec)
            ev_lines.append(n)
        elif kind == "edge":
            edges.append(rec)
            ed_lines.append(n)
        elif kind in ("header", "update"):
            if kind == "header":
                if saw_header:
                    errors.append(LoadError("OT110", "second header record", path=path, line=n))
                saw_header = True
            merge_log_header(top, rec)
        else:
            err = LoadError(
                "OT110",
                f'unknown record kind {kind!r}: expected "rec" to be header, event, edge or update',
                path=path,
                line=n,
            )
            if not tolerant:
                raise err
            errors.append(err)
    if not saw_header and not tolerant:
        raise LoadError("OT110", 'event log has no header line ({"rec": "header", ...})', path=path, line=1)
    top["events"] = events
    top["edges"] = edges
    top.setdefault("rewards", {})
    if "costs" not in top and events and all(isinstance(e, dict) for e in events):
        top["_derived_costs"] = True
    return RawTrace(
        top,
        path,
        event_lines=ev_lines,
        edge_lines=ed_lines,
        log_errors=errors,
        duplicates=dups,
        large=longest[0] > MAX_STRING_CHARS,
    )


def merge_log_header(top: dict[str, Any], rec: dict[str, Any]) -> None:
    """Fold a header or update record of an event log into the trace's top-level fields: the
    rewards, costs, metrics and metadata objects merge key by key; any other field is replaced."""
    for k, v in rec.items():
        if k in TRACE_OBJECT_FIELDS and isinstance(v, dict) and isinstance(top.get(k), dict):
            top[k].update(v)
        else:
            top[k] = v


def raw_to_trace(raw: RawTrace) -> Trace:
    d = raw.data
    derived = d.pop("_derived_costs", False)
    tr = trace_from_dict(d)
    if derived:
        tr.costs = derived_costs(tr.events)
    return tr
