"""Golden outputs of the CLI on a small generated corpus: a refactor that changes no behaviour
keeps every command's exit code, stdout, stderr and written files (by sha256) as they were.

The corpus is made in the test (``gen`` with a fixed seed, a scripted ``run`` on the logical
clock, a synthetic bank), so nothing outside the repository is needed. Commands run in-process
(typer's runner) in one working directory with relative paths, so outputs hold no temp paths.

A deliberate change of output updates the goldens in its own commit:
``ORCHESTRACE_UPDATE_GOLDEN=1 pytest tests/integration/test_cli_golden.py`` rewrites
``tests/data/golden/cli/*.txt``; review the diff before committing it.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from orchestrace.cli import app
from orchestrace.cli import output as cli_output
from orchestrace.core.errors import OrchestraceError

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "cli"
UPDATE = os.environ.get("ORCHESTRACE_UPDATE_GOLDEN") == "1"
WIDTH = 120

SPEC = """total = "hybrid"
[[terms]]
channel = "team"
[[terms]]
channel = "tool"
weight = 0.5
"""

#: name -> (arguments, files the command writes). Order matters: later commands read earlier files.
CASES: dict[str, tuple[list[str], list[str]]] = {
    "gen": (["gen", "-o", "c.jsonl", "-n", "6", "--size", "40", "--seed", "7"], ["c.jsonl"]),
    "gen_events": (
        ["gen", "-o", "one.events.jsonl", "--size", "30", "--topology", "swarm", "--seed", "3"],
        ["one.events.jsonl"],
    ),
    "schema": (["schema"], []),
    "validate": (["validate", "c.jsonl", "one.events.jsonl"], []),
    "validate_json": (["validate", "c.jsonl", "-f", "json"], []),
    "validate_bad": (["validate", "bad.json"], []),
    "stats": (["stats", "c.jsonl"], []),
    "stats_json": (["stats", "c.jsonl", "one.events.jsonl", "-f", "json"], []),
    "analyze": (["analyze", "c.jsonl", "-q"], []),
    "analyze_json": (["analyze", "c.jsonl", "-f", "json", "-q", "-o", "metrics.jsonl"], ["metrics.jsonl"]),
    "analyze_csv_by": (["analyze", "c.jsonl", "-f", "csv", "--by", "topology", "-q"], []),
    "critical_path": (["critical-path", "c.jsonl"], []),
    "critical_path_steps": (["critical-path", "c.jsonl", "--by", "steps", "-f", "json"], []),
    "safety": (["safety", "c.jsonl", "--limit", "5"], []),
    "safety_json": (["safety", "c.jsonl", "-f", "json", "--limit", "3"], []),
    "reward": (["reward", "c.jsonl", "-q"], []),
    "reward_spec_json": (
        ["reward", "c.jsonl", "-s", "spec.toml", "-f", "json", "-q", "-o", "rewarded.jsonl"],
        ["rewarded.jsonl"],
    ),
    "credit": (["credit", "c.jsonl", "-q"], []),
    "credit_shapley": (
        ["credit", "c.jsonl", "-m", "shapley", "-u", "agent,role", "--partition", "--seed", "1", "-q"],
        [],
    ),
    "credit_loo_out": (
        ["credit", "c.jsonl", "-m", "loo", "-u", "all", "-q", "-o", "credited.jsonl"],
        ["credited.jsonl"],
    ),
    "export_survey": (["export", "c.jsonl", "--to", "survey", "-o", "survey.jsonl"], ["survey.jsonl"]),
    "export_jsonl": (["export", "c.jsonl", "--to", "jsonl", "-o", "copy.jsonl"], ["copy.jsonl"]),
    "export_otlp": (
        ["export", "c.jsonl", "--to", "otlp", "--opt", "epoch=1700000000", "-o", "spans.otlp.json"],
        ["spans.otlp.json"],
    ),
    "export_trl": (["export", "c.jsonl", "--to", "trl", "-o", "trl.jsonl"], ["trl.jsonl"]),
    "import_otel": (["import", "spans.otlp.json", "-o", "reimported.jsonl", "-q"], ["reimported.jsonl"]),
    "view": (["view", "c.jsonl", "--index", "2", "-o", "view.html"], ["view.html"]),
    "run": (
        ["run", "centralized", "--backend", "scripted", "--clock", "logical", "-o", "r.events.jsonl"],
        ["r.events.jsonl", "r.cache.jsonl"],
    ),
    "replay": (["replay", "r.events.jsonl"], ["r.replay.events.jsonl"]),
    "fork": (
        ["fork", "r.events.jsonl", "--at", "e8", "--do", "replace:cold", "-o", "f.events.jsonl"],
        ["f.events.jsonl"],
    ),
    "fork_stop_offline": (
        ["fork", "r.events.jsonl", "--at", "e0", "--do", "stop", "--offline", "-o", "s.events.jsonl"],
        ["s.events.jsonl"],
    ),
    "repair": (["repair", "cut.events.jsonl", "-o", "fixed.events.jsonl"], ["fixed.events.jsonl"]),
    "ingest": (["ingest", "c.jsonl", "one.events.jsonl", "-s", "t.duckdb"], []),
    "query": (["query", "select trace_id, topology from traces order by trace_id", "-s", "t.duckdb"], []),
    "query_json": (
        [
            "query",
            "select count(*) as n, count(distinct agent) as agents from events",
            "-s",
            "t.duckdb",
            "-f",
            "json",
        ],
        [],
    ),
    "bank_synth": (["bank", "synth", "-o", "b.jsonl", "-n", "40", "--seed", "3"], ["b.jsonl"]),
    "bank_info": (["bank", "info", "b.jsonl"], []),
    "bank_traces": (["bank", "traces", "b.jsonl", "-o", "votes"], []),
    "eval_stop": (
        ["eval", "stop", "-b", "b.jsonl", "--budget", "6", "--orders", "2", "--format", "json"],
        [],
    ),
}


def _prepare(wd: Path) -> None:
    """Inputs that are not made by a command: a spec, a damaged trace, a cut event log."""
    (wd / "spec.toml").write_text(SPEC)
    (wd / "bad.json").write_text(
        '{"schema_version": "orchestrace/1", "trace_id": "x", "events": [{"id": 1}]}\n'
    )


def _cut_log(wd: Path) -> None:
    """The scripted run's event log, killed mid-line: what ``repair`` is for."""
    data = (wd / "r.events.jsonl").read_bytes()
    (wd / "cut.events.jsonl").write_bytes(data[: int(len(data) * 0.6)])


#: wall-clock durations in messages ("... in 3.47 s"), the only output that varies between runs
_ELAPSED = re.compile(r"\bin \d+(?:\.\d+)? s\b")


def _render(args: list[str], code: int, out: str, err: str, files: dict[str, str]) -> str:
    out, err = _ELAPSED.sub("in <elapsed> s", out), _ELAPSED.sub("in <elapsed> s", err)
    lines = ["$ orchestrace " + " ".join(args), f"exit: {code}", "--- stdout", out.rstrip("\n"), "--- stderr"]
    lines += [err.rstrip("\n"), "--- files"]
    lines += [f"{name} {digest}" for name, digest in files.items()]
    return "\n".join(lines) + "\n"


def _rounded(v: Any) -> Any:
    """Floats to 9 decimals and 12 significant digits, -0.0 as 0.0: sums of floats may differ in
    their last bits between CPUs (SIMD), which is no change of behaviour."""
    if isinstance(v, float):
        return float(f"{round(v, 9):.12g}") + 0.0
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def _digest(path: Path) -> str:
    """sha256 of a written file; of JSON and JSON Lines with their floats rounded (``_rounded``)."""
    if not path.exists():
        return "missing"
    if path.is_dir():
        return "dir " + " ".join(sorted(p.name for p in path.iterdir()))
    data = path.read_bytes()
    if path.suffix == ".json":
        data = orjson.dumps(_rounded(orjson.loads(data)))
    elif path.suffix == ".jsonl":
        data = b"\n".join(orjson.dumps(_rounded(orjson.loads(x))) for x in data.splitlines() if x.strip())
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every case, run once in order in one directory; name -> rendered output."""
    wd = tmp_path_factory.mktemp("golden")
    _prepare(wd)
    old_cwd = Path.cwd()
    old_width = (cli_output.console.width, cli_output.console_err.width)
    cli_output.console.width = cli_output.console_err.width = WIDTH
    os.chdir(wd)
    rendered: dict[str, str] = {}
    try:
        for name, (args, written) in CASES.items():
            if name == "repair":
                _cut_log(wd)
            res = CliRunner().invoke(app, args, env={"COLUMNS": str(WIDTH), "NO_COLOR": "1"})
            code, err = res.exit_code, res.stderr
            if isinstance(res.exception, OrchestraceError):  # what ``cli.main`` prints
                code, err = res.exception.exit_code, err + str(res.exception) + "\n"
            elif res.exception is not None and not isinstance(res.exception, SystemExit):
                raise AssertionError(f"{name}: {res.exception!r}") from res.exception
            files = {f: _digest(wd / f) for f in written}
            rendered[name] = _render(args, code, res.stdout, err, files)
    finally:
        os.chdir(old_cwd)
        cli_output.console.width, cli_output.console_err.width = old_width
    return rendered


@pytest.mark.parametrize("name", list(CASES))
def test_cli_output_matches_golden(name: str, outputs: dict[str, str]) -> None:
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(outputs[name])
        return
    assert path.exists(), f"no golden {path}; run with ORCHESTRACE_UPDATE_GOLDEN=1 to write it"
    assert outputs[name] == path.read_text(), (
        f"{name}: output differs from {path}; if the change is deliberate, rewrite the goldens with "
        "ORCHESTRACE_UPDATE_GOLDEN=1 pytest tests/integration/test_cli_golden.py and commit them"
    )
