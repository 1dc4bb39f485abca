"""Importing many files: each trace validated as written, bad files reported and skipped,
streamed to the caller (``iter_import``) or to an output file by one or several processes
(``import_files``) with the same output, notes and report for any number of processes."""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain

from ..core.errors import OrchestraceError
from ..core.model import Trace
from .inputs import Notify, load


@dataclass
class Report:
    """What an import run did, for the one-line summary."""

    per_format: Counter[str] = field(default_factory=Counter)
    unknown: Counter[str] = field(default_factory=Counter)
    failed: int = 0

    @property
    def traces(self) -> int:
        return sum(self.per_format.values())


@dataclass(slots=True)
class CheckedTrace:
    """A trace that validated: its JSON as written, the record types its importer did not know,
    and the trace itself when it stays in this process."""

    data: bytes
    unknown: dict[str, int]
    trace: Trace | None


@dataclass(slots=True)
class FileNote:
    """A line for the user about a file; ``failed``: the report counts it as a failure."""

    level: str
    message: str
    failed: bool = False


def iter_import(
    planned: list[tuple[str, str]],
    *,
    keep_content: bool = False,
    keep_home_paths: bool = False,
    notify: Notify | None = None,
    report: Report | None = None,
    done: Callable[[str], None] | None = None,
) -> Iterator[Trace]:
    """Validated traces of planned files, streamed. A bad file is reported and skipped; an empty
    or truncated one gets one line; nothing here is fatal. One process: the callers want Trace
    objects, which workers would have to pickle or this process decode again."""
    for f, name in planned:
        for step in _check_file(f, name, keep_content, keep_home_paths, keep_trace=True):
            _tell(f, name, step, notify, report)
            if isinstance(step, CheckedTrace) and step.trace is not None:
                yield step.trace
        if done is not None:
            done(f)


#: with ``workers=None``, an import of fewer bytes of logs runs in this process. Claude Code
#: sessions of the public sample, ``import_files`` in one process against two, median of five
#: (27 Nov 2026, load average 1.0 on 2 cores): 2.1 MB 41 vs 50 ms (a loss; +30 ms CPU), 4.7 MB
#: 91-114 vs 76-102 ms, 8 MB 192-209 vs 141-162 ms (+50-60 ms CPU for fork and pickling)
PARALLEL_MIN_BYTES = 4_000_000
#: files go to the processes in runs of about this many bytes: see ``_groups``
GROUP_BYTES = 1_000_000


def import_processes(
    planned: list[tuple[str, str]], out: str, workers: int | None, load: float | None = None
) -> int:
    """How many processes import ``planned`` into ``out``: ``workers`` (at most one per file), or
    with None one per CPU that other jobs leave free (``parallel.free_cpus``; at most ``MAX_PER_CPU`` per CPU either way), but 1 (this
    process) under ``PARALLEL_MIN_BYTES`` of input. Only a ``.jsonl`` output gets workers: a
    ``.json`` file or an event log holds one trace, so there is nothing to share out."""
    from ..core.read import split_format
    from ..parallel import MAX_PER_CPU, free_cpus

    if split_format(out)[0] != "jsonl":
        return 1
    if workers is not None:
        return max(1, min(workers, len(planned), MAX_PER_CPU * (os.cpu_count() or 1)))
    if sum(_size(f) for f, _ in planned) < PARALLEL_MIN_BYTES:
        return 1
    return max(1, min(free_cpus(load), len(planned)))


def import_files(
    planned: list[tuple[str, str]],
    out: str,
    *,
    keep_content: bool = False,
    keep_home_paths: bool = False,
    notify: Notify | None = None,
    report: Report | None = None,
    done: Callable[[str], None] | None = None,
    workers: int | None = None,
) -> int:
    """``iter_import`` saved to ``out`` (``core.io.save``); a ``.jsonl`` output gets the very bytes
    that were validated, so each trace is encoded once. ``workers``: processes importing files,
    this one included (None: ``import_processes``). Workers send back each file's validated JSON
    and its notes; this process replays them file by file in input order, so the output, the
    notes, the report and ``done`` calls are the same for any number of workers."""
    from ..core.io import save, write_lines
    from ..core.read import split_format
    from ..parallel import parallel_imap

    if workers is not None and workers < 1:
        raise OrchestraceError("OT010", f"workers must be at least 1, got {workers}")
    processes = import_processes(planned, out, workers)
    with _rare_young_collections():
        if split_format(out)[0] != "jsonl":
            return save(
                iter_import(
                    planned,
                    keep_content=keep_content,
                    keep_home_paths=keep_home_paths,
                    notify=notify,
                    report=report,
                    done=done,
                ),
                out,
            )
        if processes == 1:
            steps: Iterable[Iterable[CheckedTrace | FileNote]] = (
                _check_file(f, name, keep_content, keep_home_paths, keep_trace=False) for f, name in planned
            )
        else:
            groups = parallel_imap(
                _checked_files, _groups(planned), processes=processes, args=(keep_content, keep_home_paths)
            )
            steps = chain.from_iterable(groups)
        return write_lines(_replay(planned, steps, notify, report, done), out)


@contextmanager
def _rare_young_collections() -> Iterator[None]:
    """An import allocates containers in bursts (a session's records, its events) that die
    together when its trace is written, and builds no reference cycles that need collecting
    early. The collector's default, a young collection every 700 allocations, spent 0.08-0.09
    CPU s of the CLI's import of the Claude Code sample x8; one every 10,000 spends 0.02."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], 10_000), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _replay(
    planned: list[tuple[str, str]],
    steps: Iterable[Iterable[CheckedTrace | FileNote]],
    notify: Notify | None,
    report: Report | None,
    done: Callable[[str], None] | None,
) -> Iterator[bytes]:
    """The JSON of each valid trace, file by file, telling the notes and counting as it goes."""
    for (f, name), of_file in zip(planned, steps, strict=True):
        for step in of_file:
            _tell(f, name, step, notify, report)
            if isinstance(step, CheckedTrace):
                yield step.data
        if done is not None:
            done(f)


def _tell(
    f: str, name: str, step: CheckedTrace | FileNote, notify: Notify | None, report: Report | None
) -> None:
    if isinstance(step, CheckedTrace):
        if report is not None:
            report.unknown.update(step.unknown)
            report.per_format[name] += 1
        return
    if notify is not None:
        notify(f, step.level, step.message)
    if report is not None:
        report.failed += step.failed


def _checked_files(
    group: list[tuple[str, str]], keep_content: bool, keep_home_paths: bool
) -> list[list[CheckedTrace | FileNote]]:
    """``_check_file`` of a group of files in a worker process: lists, to send back; the traces
    stay behind."""
    return [list(_check_file(f, name, keep_content, keep_home_paths, keep_trace=False)) for f, name in group]


def _groups(planned: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Runs of consecutive files of about ``GROUP_BYTES``, one task each. Most session logs are
    a few KB: with a task per file, the sample x8 (744 planned files, 63 MB) took 1.16-1.19 s in
    two processes against about 1.0 s in one (each task waits for the pool's thread in this
    busy process); in 1 MB runs 0.66-0.83 s, in 0.25 MB runs 0.74-0.80 s, in 3 MB runs 0.77 s."""
    groups: list[list[tuple[str, str]]] = []
    size = GROUP_BYTES
    for item in planned:
        if size >= GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(item)
        size += _size(item[0])
    return groups


def _check_file(
    f: str, name: str, keep_content: bool, keep_home_paths: bool, *, keep_trace: bool
) -> Iterator[CheckedTrace | FileNote]:
    """What importing one file gives, in order: every trace that validates and the notes about
    the file. Validation reads the JSON about to be written through the struct fast path: the
    importer's output, exactly as saved."""
    from ..core.io import dumps
    from ..core.validate import validate_json

    try:
        for tr in load(f, name, keep_content=keep_content, keep_home_paths=keep_home_paths):
            data = dumps(tr)
            errors = [x for x in validate_json(data) if x.severity == "error"]
            if errors:  # a bug in an importer; never write an invalid trace
                yield FileNote("error", f"trace {tr.trace_id} does not validate ({errors[0]}); skipped", True)
                continue
            info = (tr.metadata or {}).get("import", {})
            if info.get("truncated"):
                yield FileNote(
                    "warn", f"truncated: last line cut off, imported up to line {info['bad_lines'][-1] - 1}"
                )
            elif info.get("bad_line_count"):
                lines = ", ".join(map(str, info["bad_lines"][:5])) + (
                    ", ..." if info["bad_line_count"] > 5 else ""
                )
                yield FileNote("warn", f"{info['bad_line_count']} unreadable line(s) skipped (line {lines})")
            if "compressed_stream_damaged_after_line" in info:
                line = info["compressed_stream_damaged_after_line"]
                yield FileNote("warn", f"compressed stream damaged after line {line}: the rest was not read")
            yield CheckedTrace(data, dict(info.get("unknown_records", {})), tr if keep_trace else None)
    except OrchestraceError as e:
        yield FileNote(
            "warn" if e.code == "OT006" else "error",
            f"{_where_in(e, f)}{e.message}; skipped",
            e.code != "OT006",
        )


def _where_in(e: OrchestraceError, f: str) -> str:
    """Where an import error lies when the note about ``f`` does not say it: the line or pointer
    in ``f``, or another file of the log (a sub-agent's .meta.json), so it can be found."""
    where = e.finding().where()
    if not where or where == f:
        return ""
    return (where.removeprefix(f).lstrip() if e.path == f else where) + ": "


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:  # gone since planning: importing it reports that
        return 0
