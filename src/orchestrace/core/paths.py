"""Where files are: the public data (``$ORCHESTRACE_DATA``, else a ``shared/data`` beside the
checkout), the files under a folder a command is given (:func:`walk_dir`) and those a pattern
names (:func:`glob_paths`): one rule each, hidden entries skipped by both."""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import LoadError, OrchestraceError


def utf8_path(path: str) -> str:
    """A path as valid UTF-8 text: a file name that is not UTF-8 (the OS gives its bytes as
    surrogate escapes) written with its bytes escaped (``bad\\xff.json``), so it can be stored."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        pass
    try:
        raw = path.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no file name byte made
        raw = path.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "backslashreplace")


def check_folder(path: str | os.PathLike[str]) -> None:
    """OT001 now, before any work, where ``make_dirs(path)`` would fail at the end of it: ``path``
    or a folder on its path is a file (a training command's -o FILE was refused only after training)."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise LoadError(
                    "OT001", "cannot make this folder: it, or a folder on its path, is a file", path=str(p)
                )
            return


def make_dirs(path: str | os.PathLike[str]) -> Path:
    """``path`` as a folder, made with its parents when missing. A file there or on its way is
    OT001 naming the path; it was FileExistsError or NotADirectoryError, an internal error (exit 3)
    of every command that writes a folder (-o FOLDER) or a file in one."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise LoadError(
            "OT001", "cannot make this folder: it, or a folder on its path, is a file", path=str(p)
        ) from None
    except OSError as e:
        raise LoadError("OT001", f"cannot make this folder: {e.strerror or e}", path=str(p)) from None
    return p


def data_dir(required: bool = True) -> Path | None:
    """The folder of public data sets (Who&When, reflexion, routellm, ...)."""
    env = os.environ.get("ORCHESTRACE_DATA")
    if env:
        p = Path(env)
        if p.is_dir():
            return p
        raise OrchestraceError("OT001", "ORCHESTRACE_DATA does not name a directory", path=env)
    here = Path.cwd().resolve()
    for base in (here, *here.parents, Path(__file__).resolve().parents[3]):
        for cand in (base / "shared" / "data", base.parent / "shared" / "data"):
            if cand.is_dir():
                return cand
    if required:
        raise OrchestraceError(
            "OT001",
            "public data not found: set ORCHESTRACE_DATA to the folder that holds who-and-when/, reflexion/, ...",
        )
    return None


def walk_dir(path: str | os.PathLike[str]) -> Iterator[str]:
    """Every file under a folder, in sorted order (folders first by name, files by name within
    each); hidden files and folders (``.git``, ``.partial-*`` outputs being written) skipped."""
    for root, dirs, files in os.walk(os.fspath(path)):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        yield from (os.path.join(root, f) for f in sorted(files) if not f.startswith("."))


def glob_paths(patterns: str | Iterable[str]) -> list[str]:
    """What a glob pattern (or several) matches, sorted and each once; ``**`` spans folders, and
    hidden files and folders match only a pattern that names them (``.x*``)."""
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    return sorted({p for pat in pats for p in glob.glob(pat, recursive=True)})
