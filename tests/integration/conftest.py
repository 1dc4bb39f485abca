"""Real public data, imported once per session for the integration tests (read from shared/data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrace import importers
from orchestrace.core.model import Trace

#: what each dataset folder holds, checked by opening the files (see shared/data/README.md)
SOURCES = {
    "claude-code": "claude-code/test/test_data/real_projects",
    "codex": "codex",
    "who-and-when": "who-and-when",
    "chatdev": "chatdev",
}


@pytest.fixture(scope="session")
def corpus(data: Path) -> dict[str, list[Trace]]:
    """Format -> its traces, through the same planning and validation as ``orchestrace import``."""
    out: dict[str, list[Trace]] = {}
    for name, rel in SOURCES.items():
        report = importers.Report()
        planned = importers.plan(importers.walk([data / rel]))
        traces = list(importers.iter_import(planned, report=report))
        assert report.failed == 0, name
        assert set(report.per_format) == {name}, report.per_format
        out[name] = traces
    return out
