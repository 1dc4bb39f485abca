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


def test_a_command_with_options_does_not_import_pydantic() -> None:
    """typer 0.29 coerces each option through a pydantic TypeAdapter, 0.14 s of CPU per command
    (docs/performance.md); requirements.txt pins a typer that does not: this fails if it comes back."""
    example = ROOT / "examples" / "run.json"
    code = (
        "import sys\n"
        "from orchestrace.cli import main\n"
        f"sys.argv = ['orchestrace', 'validate', {str(example)!r}, '--format', 'json']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('pydantic' in sys.modules)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "False", r.stdout[-500:]
