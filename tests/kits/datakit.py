"""The ``data`` fixture for tests on the real public data; a conftest imports it to offer it."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrace.core.paths import data_dir


@pytest.fixture(scope="session")
def data() -> Path:
    """shared/data (or $ORCHESTRACE_DATA); the test is skipped when it is not there."""
    d = data_dir(required=False)
    if d is None:
        pytest.skip("public data not found (set ORCHESTRACE_DATA)")
    return d
