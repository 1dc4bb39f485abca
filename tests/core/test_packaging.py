"""Packaging: the license is an SPDX string (no setuptools deprecation warning) and `--version`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
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


def test_version_flag_prints_the_package_version() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    r = subprocess.run(
        [sys.executable, "-m", "orchestrace", "--version"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout == f"orchestrace {version}\n", r.stderr
