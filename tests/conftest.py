"""Shared fixtures: where the public data and the reference schema live."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orchestrace.core.paths import data_dir

ROOT = Path(__file__).resolve().parents[1]

# Test modules are imported by path (--import-mode=importlib, so basenames may repeat across
# folders); helper modules that sit beside them (e.g. measure_kit.py) stay importable.
for _sub in sorted(Path(__file__).parent.iterdir()):
    if _sub.is_dir() and not _sub.name.startswith((".", "_")) and str(_sub) not in sys.path:
        sys.path.insert(0, str(_sub))


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    d = data_dir()
    assert d is not None
    return d.parent


@pytest.fixture(scope="session")
def reference_example(shared_dir: Path) -> Path:
    return shared_dir / "reference" / "example_trace.json"


@pytest.fixture(scope="session")
def reference_schema(shared_dir: Path) -> dict:
    import json

    return json.loads((shared_dir / "reference" / "trace_schema.json").read_text())
