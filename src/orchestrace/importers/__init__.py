"""Importers: foreign agent logs in, orchestration traces out. One module per format.

Each importer module has ``NAME``, ``sniff(path) -> bool`` and
``load(path, *, keep_content=False) -> Iterator[Trace]``; optionally ``covered(path) -> bool``
(the file is imported as part of another one, e.g. a Claude Code sub-agent log beside its
session). Third parties register more under the ``orchestrace.importers`` entry-point group
(value ``"package.module"`` or ``"package.module:object"`` with the same attributes).
"""

from .batch import (
    GROUP_BYTES,
    PARALLEL_MIN_BYTES,
    CheckedTrace,
    FileNote,
    Report,
    import_files,
    import_processes,
    iter_import,
)
from .inputs import Notify, load, plan, walk
from .registry import IMPORTERS, SUFFIXES, detect, get, names

__all__ = [
    "GROUP_BYTES",
    "IMPORTERS",
    "PARALLEL_MIN_BYTES",
    "SUFFIXES",
    "CheckedTrace",
    "FileNote",
    "Notify",
    "Report",
    "detect",
    "get",
    "import_files",
    "import_processes",
    "iter_import",
    "load",
    "names",
    "plan",
    "walk",
]
