"""Packaging: the license is an SPDX string (no setuptools deprecation warning) and `--version`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

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


#: what validate's start-up no longer imports (python -X importtime, 28 Nov 2026, load average
#: 13: 60-100 ms of 0.3 s): rich.progress (a bar validate never draws), tempfile (atomic writes,
#: stdin copies, the worker pool's folder), hashlib (trace ids met twice), the store's schema
_NOT_AT_VALIDATE = ("rich.progress", "tempfile", "hashlib", "orchestrace.store.schema")


@pytest.mark.parametrize(
    ("command", "unwanted"),
    [
        (["validate", "--format", "json"], ("pydantic", "pyarrow", *_NOT_AT_VALIDATE)),
        (["analyze", "-q"], ("pydantic", "pyarrow")),
    ],
)
def test_commands_on_a_trace_file_import_neither_pydantic_nor_pyarrow(
    command: list[str], unwanted: tuple[str, ...]
) -> None:
    """typer 0.29 coerces each option through a pydantic TypeAdapter (0.14 s of CPU per command)
    and the store module imported pyarrow at its top (70 ms) for every command that reads traces
    (docs/performance.md): this fails when either comes back, or a module validate does not need."""
    argv = ["orchestrace", command[0], str(ROOT / "examples" / "run.json"), *command[1:]]
    code = (
        "import sys\n"
        "from orchestrace.cli import main\n"
        f"sys.argv = {argv!r}\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        f"print(sorted(m for m in {unwanted!r} if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "[]", r.stdout[-500:]
