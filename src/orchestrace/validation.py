"""Validating files over worker processes, a large JSONL file in pieces, as ingest prepares it.

Each piece is checked alone wherever it runs (``core.validate.check_piece``), and this process
puts every file's pieces together in file order (``merge_pieces``): findings, their order and
lines (from the file's start), counts and verdicts are those of ``validate_path`` reading the
file whole, for any number of processes. The process count follows ingest's rule
(``parallel.file_processes``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .core.errors import Finding
from .core.read import Piece, split_file
from .core.validate import (
    DEFAULT_MAX_FINDINGS,
    PieceCheck,
    ValidationResult,
    check_piece,
    merge_pieces,
    validate_path,
)
from .parallel import file_processes, parallel_imap

#: with ``workers=None``, an input smaller than this is validated in this process (see
#: docs/performance.md section 7)
PARALLEL_MIN_BYTES = 8_000_000
#: a JSONL file past this size is shared out in pieces of about this size (cut at lines), so
#: that the processes finish together
PIECE_BYTES = 4_000_000
#: validate met a bug on a file: reported as that file's finding, exit 3
INTERNAL = "OT900"


def internal_finding(e: BaseException, path: str) -> Finding:
    """A bug met on ``path``: its finding, so that the other files are still validated."""
    what = f"{type(e).__name__}: {str(e)[:200]}"
    msg = f"internal error ({what}): a bug in orchestrace, not in the file; please report it"
    return Finding(code=INTERNAL, severity="error", message=msg, path=path)


def validate_processes(files: Sequence[str], workers: int | None, load: float | None = None) -> int:
    """How many processes validate ``files``: ``parallel.file_processes`` with validate's sizes."""
    return file_processes(files, workers, PARALLEL_MIN_BYTES, PIECE_BYTES, load)


def validate_files(
    files: Sequence[str], *, max_findings: int = DEFAULT_MAX_FINDINGS, workers: int | None = None
) -> Iterator[ValidationResult]:
    """``validate_path`` of each file, in order, over ``validate_processes`` processes; a bug
    met on a file is that file's one finding (``INTERNAL``)."""
    processes = validate_processes([f for f in files if f != "-"], workers)
    if processes == 1:
        for f in files:
            yield _whole(f, max_findings)
        return
    # standard input is read by this process, in its turn; every other file goes in pieces
    pieces = [(i, p) for i, f in enumerate(files) if f != "-" for p in split_file(f, PIECE_BYTES)]
    checks = zip(
        (i for i, _ in pieces),
        parallel_imap(_check, [p for _, p in pieces], processes=processes, args=(max_findings,)),
        strict=True,
    )
    pending = next(checks, None)
    for i, f in enumerate(files):
        if f == "-":
            yield _whole(f, max_findings)
            continue
        mine: list[PieceCheck | Finding] = []
        while pending is not None and pending[0] == i:
            mine.append(pending[1])
            pending = next(checks, None)
        yield _merged(f, mine, max_findings)


def _whole(path: str, max_findings: int) -> ValidationResult:
    try:
        return validate_path(path, max_findings=max_findings)
    except Exception as e:  # noqa: BLE001 - a bug met on one file must not hide the others
        return ValidationResult(path, False, [internal_finding(e, path)])


def _check(piece: Piece, max_findings: int) -> PieceCheck | Finding:
    """In any process: a piece's check, or the finding of the bug it met."""
    try:
        return check_piece(piece, max_findings)
    except Exception as e:  # noqa: BLE001 - the file's result says so; the other files go on
        return internal_finding(e, piece.path)


def _merged(path: str, checks: list[PieceCheck | Finding], max_findings: int) -> ValidationResult:
    """A file's result from its pieces in order, as one process reading it whole would give it:
    a read error ends the file, so what follows it was never read; a bug met before that makes
    the file's one finding."""
    read: list[PieceCheck] = []
    for c in checks:
        if isinstance(c, Finding):
            return ValidationResult(path, False, [c])
        read.append(c)
        if c.stopped is not None:
            break
    try:
        return merge_pieces(path, read, max_findings)
    except Exception as e:  # noqa: BLE001 - as validate_path's own bug would be reported
        return ValidationResult(path, False, [internal_finding(e, path)])
