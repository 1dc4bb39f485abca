"""End to end: tiny training runs give JSON-able held-out results; the CLI functions run them."""

from __future__ import annotations

import json

import msgspec
import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from orchestrace.cli import experiment_commands as cmd
from orchestrace.learn.experiments import split, train_delegate, train_retry, train_swarm, write_trained
from orchestrace.learn.experiments.delegate import DelegateTraining
from orchestrace.learn.experiments.protocol import Comparison, MeanCI, comparisons
from orchestrace.learn.experiments.retry import RetryTraining
from orchestrace.learn.experiments.swarm import SwarmReport


def test_split_is_fixed_and_disjoint() -> None:
    a, b = split(100)
    assert len(a) == 60 and len(b) == 40 and not set(a) & set(b)
    assert np.array_equal(split(100)[0], a)


def test_comparisons_say_win_tie_or_loss_for_every_baseline() -> None:
    result = SwarmReport(
        tasks_heldout=0,
        methods={},
        learned_minus_k2_r_perf=MeanCI(0.02, (0.005, 0.04)),
        learned_minus_makespan_heuristic_r_perf=MeanCI(-0.006, (-0.016, 0.001)),
        learned_minus_serial_r_perf=MeanCI(-0.077, (-0.139, -0.011)),
        learned_minus_max_agents_r_perf=MeanCI(0.0, (0.0, 0.0)),
    )  # the fields left None (no such comparison) are skipped
    assert comparisons(result) == [
        Comparison("serial", -0.077, -0.139, -0.011, "loses"),
        Comparison("max_agents", 0.0, 0.0, 0.0, "tie"),
        Comparison("k2", 0.02, 0.005, 0.04, "wins"),
        Comparison("makespan_heuristic", -0.006, -0.016, 0.001, "tie"),
    ]
    app = typer.Typer()
    app.command()(lambda: cmd._comparisons(result, "r_perf"))
    printed = " ".join(CliRunner().invoke(app, []).output.split())
    assert "learned - makespan_heuristic (r_perf): -0.0060, paired 95% CI [-0.0160, +0.0010]" in printed
    assert "no significant difference (the CI contains 0); learned is lower" in printed
    assert "the learned policy beats k2; ties max_agents, makespan_heuristic; loses to serial" in printed


@pytest.mark.slow
def test_tiny_runs_are_json_and_complete(tmp_path, public_excerpt) -> None:
    r = write_trained(tmp_path, train_retry(["humaneval"], 0.1, iters=2, batch=16, data=public_excerpt))
    h = json.loads((tmp_path / "retry-result.json").read_text())["families"]["humaneval"]
    assert (
        h["tasks_heldout"] == 5  # the excerpt's 12 tasks: round(0.6 * 12) = 7 train, 5 held out
        and "1" in h["fixed_caps"]
        and (tmp_path / "retry-humaneval.safetensors").exists()
        and r.files_written == [str(tmp_path / f) for f in ("retry-humaneval.safetensors", "retry-humaneval.json",
                                                             "retry-result.json")]
    )  # fmt: skip
    # the fixed cap 1 gives up after the first attempt: success = first-try solves only
    assert h["fixed_caps"]["1"]["mean_attempts"] == 1.0
    # the file holds the returned struct, field for field (floats exact)
    assert msgspec.json.decode((tmp_path / "retry-result.json").read_bytes(), type=RetryTraining) == r
    dr = write_trained(tmp_path, train_delegate("gsm8k", 0.1, iters=2, batch=32, data=public_excerpt))
    assert (
        msgspec.json.decode((tmp_path / "delegate-gsm8k-result.json").read_bytes(), type=DelegateTraining)
        == dr
    )
    d = json.loads((tmp_path / "delegate-gsm8k-result.json").read_text())
    # the excerpt's 40 prompts less 4 contaminated: round(0.6 * 36) = 22 train, 14 held out
    assert d["queries_heldout"] == 14 and {"learned", "threshold_router", "oracle"} <= set(d["methods"])
    assert d["algo"]["name"] == "grpo"  # the default to route (reinforce to cascade)
    assert (
        d["methods"]["oracle"]["reward"]["mean"]
        >= max(v["reward"]["mean"] for v in d["methods"].values()) - 1e-12
    )
    s = write_trained(tmp_path, train_swarm(iters=2, batch=16, group=4, eval_tasks=6))
    assert (
        json.loads((tmp_path / "swarm-result.json").read_text())["methods"]["serial"]["spawned_per_stage"]
        == 0.0
    )
    assert s.methods["serial"].spawned_per_stage == 0.0


@pytest.mark.slow
def test_cli_functions(tmp_path, public_excerpt) -> None:
    app = typer.Typer()
    app.command("train-retry")(cmd.train_retry_cmd)
    app.command("eval-retry")(cmd.eval_retry_cmd)
    app.command("eval-swarm")(cmd.eval_swarm_cmd)
    run = CliRunner()
    res = run.invoke(
        app,
        ["train-retry", "-f", "humaneval", "--iters", "2", "-o", str(tmp_path), "--data", str(public_excerpt)]
        + ["--format", "json"],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["families"]["humaneval"]["cost"] == 0.1
    pol = tmp_path / "retry-humaneval.safetensors"
    res = run.invoke(
        app,
        ["eval-retry", "-p", str(pol), "-f", "alfworld", "--data", str(public_excerpt), "--format", "json"],
    )
    assert res.exit_code == 0 and json.loads(res.output)["trained_on"] == "humaneval"
    res = run.invoke(app, ["eval-retry", "-p", str(pol), "-f", "humaneval", "--data", str(public_excerpt)])
    printed = " ".join(res.output.split())  # the table, then one plain line per baseline comparison
    assert res.exit_code == 0 and "humaneval: learned - train_cap (reward):" in printed
    assert "paired 95% CI" in printed and "learned - hindsight_cap" in printed
    assert "humaneval: the learned policy " in printed  # the closing line: beats / ties / loses to
    app.command("train-delegate")(cmd.train_delegate_cmd)
    app.command("eval-delegate")(cmd.eval_delegate_cmd)
    args = ["-s", "gsm8k", "--data", str(public_excerpt)]
    res = run.invoke(app, ["train-delegate", *args, "--iters", "2", "-o", str(tmp_path), "--format", "json"])
    assert res.exit_code == 0, res.output
    res = run.invoke(app, ["eval-delegate", *args, "-p", str(tmp_path / "delegate-gsm8k.safetensors")])
    printed = " ".join(res.output.split())
    assert res.exit_code == 0 and "learned - threshold_router (reward):" in printed, res.output
    res = run.invoke(app, ["eval-swarm", "--eval-tasks", "4", "--format", "json"])
    assert res.exit_code == 0 and "makespan_heuristic" in json.loads(res.output)["methods"]
    res = run.invoke(app, ["eval-swarm", "--format", "yaml"])
    assert res.exit_code != 0


@pytest.mark.parametrize(
    ("command", "trainer"),
    [
        (cmd.train_retry_cmd, "train_retry"),
        (cmd.train_delegate_cmd, "train_delegate"),
        (cmd.train_swarm_cmd, "train_swarm"),
    ],
)
def test_an_output_that_is_a_file_is_refused_before_training(tmp_path, monkeypatch, command, trainer) -> None:
    """-o FILE: OT001 before any training (it was raised by the writer only after training)."""
    import orchestrace.learn.experiments as experiments
    from orchestrace.core.errors import LoadError

    def must_not_train(*args, **kwargs):
        raise AssertionError("trained before the output folder was checked")

    monkeypatch.setattr(experiments, trainer, must_not_train)
    app = typer.Typer()
    app.command("train")(command)
    app.command("other")(cmd.eval_swarm_cmd)  # two commands: typer keeps the name "train"
    afile = tmp_path / "taken"
    afile.write_text("x")
    for out in (afile, afile / "below"):
        res = CliRunner().invoke(app, ["train", "-o", str(out)])
        assert isinstance(res.exception, LoadError), res.output
        assert res.exception.code == "OT001" and res.exception.path == str(out)
