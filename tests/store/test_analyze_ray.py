"""``orchestrace analyze --ray`` spreads traces over Ray tasks and reports exactly what local mode does."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from orchestrace.cli import app


def test_analyze_with_ray_equals_local(corpus, ray_local: str) -> None:
    files, _ = corpus
    args = ["analyze", *map(str, files), "--format", "json", "-q"]
    local = CliRunner().invoke(app, args)
    assert local.exit_code == 0, local.output
    remote = CliRunner().invoke(app, [*args, "--ray"])
    assert remote.exit_code == 0, remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    assert len(a["traces"]) == 13
    assert a == b
