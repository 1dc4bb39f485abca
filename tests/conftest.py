"""Shared fixtures: the vendored reference schema and example, and the public data.

Only the ``data`` fixture reads outside the repository. Without the public data a test that asks
for it skips with one line (``MISSING_DATA``); under CI (the env var ``CI`` set) it fails instead,
so CI always runs it against ``../shared/data``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from orchestrace.core.paths import data_dir

ROOT = Path(__file__).resolve().parents[1]
#: verbatim copies of the survey's reference files (see tests/data/reference/NOTICE.md)
REFERENCE = Path(__file__).resolve().parent / "data" / "reference"
#: the first records of a few public logs, in shared/data's layout (see tests/data/public/NOTICE.md)
PUBLIC_EXCERPT = Path(__file__).resolve().parent / "data" / "public"
MISSING_DATA = "public data not found: these tests need shared/data beside the checkout or $ORCHESTRACE_DATA"

# Test modules are imported by path (--import-mode=importlib, so basenames may repeat across
# folders); helper modules that sit beside them (e.g. measure_kit.py) stay importable.
for _sub in sorted(Path(__file__).parent.iterdir()):
    if _sub.is_dir() and not _sub.name.startswith((".", "_")) and str(_sub) not in sys.path:
        sys.path.insert(0, str(_sub))


@pytest.fixture(scope="session")
def data() -> Path:
    """shared/data (or $ORCHESTRACE_DATA); skipped without it, failed without it under CI."""
    d = data_dir(required=False)
    if d is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set and {MISSING_DATA}", pytrace=False)
        pytest.skip(MISSING_DATA)
    return d


@pytest.fixture(scope="session")
def reference_example() -> Path:
    return REFERENCE / "example_trace.json"


@pytest.fixture(scope="session")
def reference_schema() -> dict:
    return json.loads((REFERENCE / "trace_schema.json").read_text())


@pytest.fixture(scope="session")
def public_excerpt() -> Path:
    """A ``root=`` for ``orchestrace.learn.datasets``: small excerpts vendored in the repository."""
    return PUBLIC_EXCERPT
