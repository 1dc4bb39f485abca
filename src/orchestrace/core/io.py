"""Loading validated traces and writing them: ``.json``, ``.jsonl`` and the streaming
``.events.jsonl`` log (gzip or zstd by extension). Raw reading lives in ``read``, checks in
``validate``; this module sits on both.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson

from .errors import LoadError
from .fastload import load_clean
from .limits import MAX_DEPTH
from .model import TRACE_HEADER_FIELDS, TRACE_NUMBER_MAPS, Edge, Event, Trace, event_to_dict, trace_to_dict
from .read import REC, RawTrace, iter_raw, parse_json, raw_to_trace, split_format
from .validate import check_raw

# ---------------------------------------------------------------- typed load / save


def load(path: str | os.PathLike[str], *, validate: bool = True) -> list[Trace]:
    """All traces of a file, validated (raises InvalidTrace with every finding)."""
    return list(iter_traces(path, validate=validate))


def load_one(path: str | os.PathLike[str], *, validate: bool = True) -> Trace:
    traces = load(path, validate=validate)
    if len(traces) != 1:
        raise LoadError("OT111", f"expected exactly one trace, found {len(traces)}", path=os.fspath(path))
    return traces[0]


def iter_traces(path: str | os.PathLike[str], *, validate: bool = True) -> Iterator[Trace]:
    if validate and (tr := load_clean(os.fspath(path))) is not None:
        yield tr  # a clean .json or event log, decoded straight into structs (core.fastload)
        return
    for raw in iter_raw(path, check_duplicates=validate):  # a duplicate key is OT005 here too
        if validate:
            check_raw(raw, raise_on_error=True)
        yield raw_to_trace(raw)


def loads(data: bytes | str, *, validate: bool = True) -> Trace:
    """One trace from JSON text."""
    b = data.encode() if isinstance(data, str) else data
    raw = RawTrace(parse_json(b), "<string>")
    if validate:
        check_raw(raw, raise_on_error=True, source=b)
    return raw_to_trace(raw)


def dumps(trace: Trace, *, indent: bool = False) -> bytes:
    """JSON bytes of one trace (deterministic: same trace, same bytes)."""
    _check_finite(trace)
    try:
        return orjson.dumps(trace_to_dict(trace), option=orjson.OPT_INDENT_2 if indent else 0)
    except TypeError as e:  # orjson stops at 255 levels; a trace built from a deeper foreign value
        if "Recursion limit" not in str(e):
            raise
        raise LoadError(
            "OT008", f"trace {trace.trace_id!r}: nested deeper than {MAX_DEPTH} levels of arrays/objects"
        ) from None


def _check_finite(trace: Trace) -> None:
    import math

    for name in TRACE_NUMBER_MAPS:
        for k, v in (getattr(trace, name) or {}).items():
            if isinstance(v, float) and not math.isfinite(v):
                raise LoadError(
                    "OT208", f"{name}.{k} is {v}: cannot write a non-finite number", pointer=f"/{name}/{k}"
                )


def open_write(path: str, append: bool = False, *, final: str | None = None) -> IO[bytes]:
    """A binary stream compressing as the extension says. ``final``: the name the file will
    have (``atomic_output``), written into the gzip header so the bytes do not depend on the
    temporary name."""
    _, comp = split_format(path)
    mode = "ab" if append else "wb"
    if path == "-":
        return sys.stdout.buffer
    if comp == "gz":
        g = gzip.GzipFile(final or path, mode=mode, fileobj=open(path, mode), mtime=0)  # noqa: SIM115
        g.myfileobj = g.fileobj  # GzipFile closes only a file it opened itself: this one too
        return g  # type: ignore[return-value]
    if comp == "zst":
        import zstandard

        raw = open(path, mode)  # noqa: SIM115
        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=True)  # type: ignore[return-value]
    return open(path, mode)  # noqa: SIM115


@contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary path beside ``path`` (same folder, same extensions) that replaces ``path``
    (``os.replace``) when the block succeeds and is removed when it fails: an output file
    appears only complete, never empty or half-written, with the mode a plain ``open`` gives
    (0644 under the usual umask). ``-`` (stdout) passes through."""
    p = os.fspath(path)
    if p == "-":
        yield p
        return
    target = Path(p)
    import tempfile  # here: a command that writes nothing does not pay its start-up time

    # a folder there failed at the final os.replace, a file where a folder belongs at mkdir: both
    # were internal errors (exit 3), the first after all the work
    if target.is_dir():
        raise LoadError("OT001", "is a directory, expected a file to write", path=p)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".partial-", suffix=f"-{target.name}", dir=target.parent)
    except (FileExistsError, NotADirectoryError):
        raise LoadError("OT001", "cannot write here: a folder on its path is a file", path=p) from None
    except OSError as e:
        raise LoadError("OT001", f"cannot write here: {e.strerror or e}", path=p) from None
    os.close(fd)
    umask = os.umask(0o022)  # read it (os.umask sets and returns): mkstemp's 0600 would stay
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # the mode open() gives a new file
    try:
        yield tmp
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save(traces: Trace | Iterable[Trace], path: str | os.PathLike[str]) -> int:
    """Write traces in the format the extension names; returns how many were written. ``.jsonl``
    (also ``.gz``/``.zst``) is streamed, one trace in memory; a single-trace format (``.json``, an
    event log) given no trace writes nothing. The file appears only when every trace is written
    (``atomic_output``): a failure mid-stream leaves no empty or partial output behind."""
    p = os.fspath(path)
    fmt, _ = split_format(p)
    if isinstance(traces, Trace):
        traces = [traces]
    if fmt == "jsonl":
        return write_lines((dumps(tr) for tr in traces), p)
    items = list(traces)
    if not items:
        return 0
    if fmt == "json" and len(items) != 1:
        named = p.lower().removesuffix(".gz").removesuffix(".zst").endswith(".json")
        msg = (
            f"a .json file holds exactly one trace, got {len(items)}: use .jsonl"
            if named
            else f"written as one JSON trace (the name does not end in .jsonl), got {len(items)} traces: use .jsonl"
        )
        raise LoadError("OT112", msg, path=p)
    if fmt == "events" and len(items) != 1:
        raise LoadError("OT112", f"an event log holds exactly one trace, got {len(items)}", path=p)
    if fmt == "json":
        lines: Iterable[bytes] = [dumps(items[0], indent=len(items[0].events) <= 10_000)]
    else:
        lines = (line.removesuffix(b"\n") for line in event_log_lines(items[0]))
    write_lines(lines, p)
    return 1


def write_lines(lines: Iterable[bytes], path: str | os.PathLike[str]) -> int:
    """Encoded lines (JSONL traces, or a trace's JSON or event log) written to ``path``, each with
    a newline, compressed as its extension says, atomically; returns how many lines."""
    p = os.fspath(path)
    n = 0
    with atomic_output(p) as tmp:
        f = open_write(tmp, final=p)
        try:
            for data in lines:
                f.write(data + b"\n")
                n += 1
        finally:
            if tmp != "-":
                f.close()
            else:
                f.flush()
    return n


def event_log_lines(tr: Trace) -> Iterator[bytes]:
    """The lines of a trace written as an event log (header, events, edges)."""
    _check_finite(tr)
    d = trace_to_dict(tr)
    header = {REC: "header", **{k: d[k] for k in TRACE_HEADER_FIELDS if k in d}}
    yield orjson.dumps(header) + b"\n"
    for e in d["events"]:
        yield orjson.dumps({REC: "event", **e}) + b"\n"
    for x in d["edges"]:
        yield orjson.dumps({REC: "edge", **x}) + b"\n"


_ENC = msgspec.json.Encoder()
_EVENT_PREFIX = b'{"' + REC.encode() + b'":"event",'
_EDGE_PREFIX = b'{"' + REC.encode() + b'":"edge",'


class EventLogWriter:
    """Appends records to an event log as a run happens; each record is flushed at once.

    ``fsync``: ``"never"`` (flush to the OS only: survives a killed process), ``"always"``
    (survives power loss, slower) or a number N (fsync every N records).
    """

    def __init__(
        self, path: str | os.PathLike[str], header: dict[str, Any], *, fsync: str | int = "never"
    ) -> None:
        self.path = os.fspath(path)
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._f = open_write(self.path)
        self._fsync = fsync
        self._count = 0
        self._write({REC: "header", **header})

    def _write(self, rec: dict[str, Any]) -> None:
        self._f.write(orjson.dumps(rec) + b"\n")
        self._f.flush()
        self._count += 1
        if self._fsync == "always" or (isinstance(self._fsync, int) and self._count % self._fsync == 0):
            raw = getattr(self._f, "fileno", None)
            if raw is not None:
                try:
                    os.fsync(raw())
                except (OSError, io.UnsupportedOperation):
                    pass

    def event(self, e: Event) -> None:
        self._write({REC: "event", **event_to_dict(e)})

    def record(self, ev: Event, edges: list[Edge]) -> None:
        """An event with its incoming edges in one write (and one flush), so a kill cuts at most
        that event and its edges: the recorder's hot path. Encoding the Event struct directly
        gives the same bytes as the dict path of ``event``, four times faster."""
        if ev.extra:
            line = orjson.dumps({REC: "event", **event_to_dict(ev)})
        else:
            line = _EVENT_PREFIX + _ENC.encode(ev)[1:]
        buf = [line]
        for x in edges:
            buf.append(_EDGE_PREFIX + _ENC.encode(x)[1:])
        buf.append(b"")
        self._f.write(b"\n".join(buf))
        self._f.flush()
        self._count += 1 + len(edges)
        if self._fsync == "always" or (
            isinstance(self._fsync, int) and self._count % self._fsync < 1 + len(edges)
        ):
            try:
                os.fsync(self._f.fileno())
            except (OSError, ValueError):
                pass

    def edge(self, src: str, dst: str, type: str) -> None:
        self._write({REC: "edge", "src": src, "dst": dst, "type": type})

    def update(self, **fields: Any) -> None:
        """Merge top-level fields (rewards, costs, metrics, metadata...) known later in the run."""
        self._write({REC: "update", **fields})

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> EventLogWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
