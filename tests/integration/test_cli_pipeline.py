"""The same pipeline through the real CLI (``python -m orchestrace`` in a subprocess): exit codes,
files each command hands to the next, and one-line errors for user mistakes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from measure_kit import assert_unclamped_invariants

from orchestrace.core.io import load
from orchestrace.core.model import event_to_dict
from orchestrace.credit import partition_gap
from orchestrace.importers import otlp
from orchestrace.measure import REPORT_KEYS

HERE = Path(__file__).parent
SPEC = """
total = "hybrid"
[[terms]]
channel = "team"
[[terms]]
channel = "tool"
weight = 0.5
[hooks]
verifier = "integration_hooks:clean_finish"
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "orchestrace", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0, f"exit {res.returncode}\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}"
    assert "Traceback" not in res.stderr
    return res


@pytest.fixture(scope="module")
def workdir(data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ChatDev logs, the Codex rollout and the Claude Code orchestrator session with six
    teammates, imported by the CLI into one corpus."""
    wd = tmp_path_factory.mktemp("cli")
    session = data / "claude-code/test/test_data/real_projects/-experiments-worktrees"
    session = session / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    res = ok(
        run(
            "import",
            str(data / "chatdev"),
            str(data / "codex"),
            str(session),
            "-o",
            "all.jsonl",
            "-q",
            cwd=wd,
        )
    )
    assert "imported 9 trace(s)" in res.stdout + res.stderr
    (wd / "spec.toml").write_text(SPEC)
    return wd


def test_validate_and_analyze(workdir: Path) -> None:
    res = ok(run("validate", "all.jsonl", "-q", cwd=workdir))
    assert "0 error(s)" in res.stdout
    res = ok(run("analyze", "all.jsonl", "--format", "json", "-o", "measured.jsonl", cwd=workdir))
    report = json.loads(res.stdout)
    assert len(report["traces"]) == 9
    for tr, r in zip(load(str(workdir / "all.jsonl")), report["traces"], strict=True):
        assert set(REPORT_KEYS) <= set(r) and r["trace_id"] == tr.trace_id
        assert_unclamped_invariants(tr, r)
    assert report["corpus"]["coverage"]["E2"] is True
    table = ok(run("analyze", "all.jsonl", cwd=workdir)).stdout
    assert "MAS-native" in table.splitlines()[-1]
    # the metrics written back are numbers under the reference keys and orchestrace.*
    measured = load(str(workdir / "measured.jsonl"))
    assert all(tr.metrics and "orchestrace.critical_path_s" in tr.metrics for tr in measured)


def test_reward_credit_export(workdir: Path, reference_schema: dict) -> None:
    ok(run("reward", "--spec", "spec.toml", "all.jsonl", "-o", "rewarded.jsonl", cwd=workdir))
    ok(
        run(
            "credit", "--method", "shapley", "--unit", "agent", "--partition", "--channel", "hybrid",
            "rewarded.jsonl", "-o", "credited.jsonl", cwd=workdir,
        )
    )  # fmt: skip
    credited = load(str(workdir / "credited.jsonl"))
    assert len(credited) == 9
    for tr in credited:
        want = tr.rewards["team"] + 0.5 * tr.rewards.get("tool", 0.0)
        assert abs(tr.rewards["hybrid"] - want) < 1e-12
        assert abs(partition_gap(tr, "shapley/agent", tr.rewards["hybrid"])) < 1e-9

    ok(run("export", "credited.jsonl", "--to", "survey", "-o", "survey.jsonl", cwd=workdir))
    validator = jsonschema.Draft202012Validator(reference_schema)
    lines = (workdir / "survey.jsonl").read_text().splitlines()
    assert len(lines) == 9
    for line in lines:
        assert list(validator.iter_errors(json.loads(line))) == []

    ok(run("export", "credited.jsonl", "--to", "otlp", "-o", "spans.json", cwd=workdir))
    spans = json.loads((workdir / "spans.json").read_text())
    assert len(spans["resourceSpans"]) == 9  # one resource per trace
    # the spans import back as the traces they came from: events (content aside), edges, costs
    back = list(otlp.load(workdir / "spans.json"))
    assert [t.trace_id for t in back] == [t.trace_id for t in credited]
    for a, b in zip(credited, back, strict=True):
        assert [event_to_dict(e) for e in b.events] == [event_to_dict(e) for e in a.events], a.trace_id
        assert sorted(b.edges, key=repr) == sorted(a.edges, key=repr) and b.costs == a.costs

    res = run(
        "export", "credited.jsonl", "--to", "trl", "-o", "trl", "--opt", "method=shapley",
        "--opt", "unit=agent", "--opt", "channel=hybrid", cwd=workdir,
    )  # fmt: skip
    # imported without content: no completion text to train on, a one-line error and no output
    assert res.returncode != 0 and "Traceback" not in res.stderr and "--keep-content" in res.stderr
    assert not (workdir / "trl").exists()
    ok(
        run(
            "export", "credited.jsonl", "--to", "samples", "-o", "samples", "--opt", "method=shapley",
            "--opt", "unit=agent", "--opt", "channel=hybrid", cwd=workdir,
        )
    )  # fmt: skip
    rows = [json.loads(x) for f in (workdir / "samples").glob("*.jsonl") for x in f.read_text().splitlines()]
    by_event = {(tr.trace_id, e.id): e.credit["shapley/agent"] for tr in credited for e in tr.events}
    assert rows and all(r["advantage"] == by_event[(r["trace_id"], r["event_id"])] for r in rows)


def test_user_mistakes_are_one_line_errors(workdir: Path) -> None:
    res = run("analyze", "missing.jsonl", cwd=workdir)
    assert res.returncode != 0 and "Traceback" not in res.stderr and "missing.jsonl" in res.stderr
    res = run("credit", "--method", "nope", "all.jsonl", cwd=workdir)
    assert res.returncode != 0 and "Traceback" not in res.stderr and "nope" in res.stderr
    (workdir / "bad.toml").write_text("[[terms]]\nchanel = 'team'\n")
    res = run("reward", "--spec", "bad.toml", "all.jsonl", cwd=workdir)
    assert res.returncode != 0 and "Traceback" not in res.stderr and "bad.toml" in res.stderr
