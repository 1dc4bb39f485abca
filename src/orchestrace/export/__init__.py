"""Exporters: a trace set in, a foreign format out. One module per target, registered by name.

Each exporter is ``fn(traces: Iterable[Trace], out: str, **options) -> int`` (items written).
Third parties register their own under the ``orchestrace.exporters`` entry-point group.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

#: target name -> "module:function" (imported lazily so heavy dependencies load only when used)
EXPORTERS: dict[str, str] = {
    "survey": "orchestrace.export.survey:export_survey",
    "jsonl": "orchestrace.export.survey:export_jsonl",
    "otlp": "orchestrace.export.otlp:export_otlp",
    "trl": "orchestrace.export.samples:export_trl",
    "verl": "orchestrace.export.samples:export_verl",
    "samples": "orchestrace.export.samples:export_samples",
}


def register(name: str, target: str) -> None:
    EXPORTERS[name] = target


def get_exporter(name: str) -> Callable[..., Any]:
    targets = dict(EXPORTERS)
    for ep in entry_points(group="orchestrace.exporters"):
        targets.setdefault(ep.name, ep.value)
    if name not in targets:
        from ..core.errors import OrchestraceError

        raise OrchestraceError(
            "OT020", f"unknown export target {name!r}; known: {', '.join(sorted(targets))}"
        )
    mod, fn = targets[name].split(":")
    return getattr(importlib.import_module(mod), fn)
