"""Shared fixtures: where the public data and the reference schema live."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrace.core.paths import data_dir

ROOT = Path(__file__).resolve().parents[1]


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
