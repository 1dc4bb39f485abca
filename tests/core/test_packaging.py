"""Packaging: the license is an SPDX string (no setuptools deprecation warning)."""

from __future__ import annotations

import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_applies_without_setuptools_warnings() -> None:
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), ROOT / "pyproject.toml")
    assert [str(w.message)[:80] for w in caught] == []
    assert dist.metadata.license_expression == "Apache-2.0"

