"""Where files are: the public data (``$ORCHESTRACE_DATA``, else a ``shared/data`` beside the
checkout) and the files under a folder a command is given (:func:`walk_dir`, the one rule)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from .errors import OrchestraceError


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
