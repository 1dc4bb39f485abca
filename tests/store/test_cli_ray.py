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


def test_credit_with_ray_equals_local(corpus, ray_local: str, tmp_path) -> None:
    from orchestrace.core.io import load

    files, _ = corpus
    outs = []
    for extra, name in (([], "local.jsonl"), (["--ray"], "ray.jsonl")):
        out = tmp_path / name
        args = [
            "credit",
            *map(str, files),
            "-m",
            "shapley",
            "-u",
            "agent",
            "--partition",
            "--samples",
            "16",
            "-q",
            "-o",
            str(out),
        ]
        r = CliRunner().invoke(app, [*args, *extra])
        assert r.exit_code == 0, r.output
        outs.append(load(out))
    local, remote = outs
    assert len(local) == 13
    assert [[e.credit for e in t.events] for t in local] == [[e.credit for e in t.events] for t in remote]
    assert any(e.credit for t in local for e in t.events)


def test_eval_stop_with_ray_equals_local(ray_local: str) -> None:
    args = ["eval", "stop", "--bank", "countries", "--budget", "20", "--format", "json"]
    local = CliRunner().invoke(app, args)
    assert local.exit_code == 0, local.output
    remote = CliRunner().invoke(app, [*args, "--ray"])
    assert remote.exit_code == 0, remote.output
    a, b = json.loads(local.stdout), json.loads(remote.stdout)
    assert len(a) == 27 and {r["method"] for r in a} >= {"fixed-20", "esc(w=5)", "hindsight-oracle"}
    assert a == b


def _policy_file(path: str) -> tuple[dict[str, str], dict[str, bytes]]:
    """Metadata and tensor bytes of a safetensors file (its header's key order is not fixed:
    safetensors keeps the metadata in a hash map)."""
    from safetensors import safe_open

    with safe_open(path, "numpy") as f:
        return f.metadata(), {k: f.get_tensor(k).tobytes() for k in f.keys()}


def test_train_stop_with_ray_equals_local(ray_local: str, tmp_path) -> None:
    reports = []
    for extra, name in (([], "local"), (["--ray"], "ray")):
        out = tmp_path / name / "policy"
        # one family each way, no budget calibration (it runs in the driver either way): the
        # sweep's policies are what goes to Ray
        args = ["train", "stop", "--iterations", "40", "--sweep", "0.01,0.02", "--target-samples", "0"]
        args += ["--bank", "countries", "--eval-bank", "plurals", "--orders", "2", "-o", str(out)]
        r = CliRunner().invoke(app, [*args, *extra])
        assert r.exit_code == 0, r.output
        reports.append(
            (
                _policy_file(str(out.with_suffix(".safetensors"))),
                json.loads((tmp_path / name / "report" / "report.json").read_text()),
            )
        )
    (w_local, rep_local), (w_ray, rep_ray) = reports
    assert w_local == w_ray
    assert (
        rep_local["results"] == rep_ray["results"]
        and rep_local["learning_curves"] == rep_ray["learning_curves"]
    )
    assert {"learned", "learned(c=0.01)", "learned(c=0.02)"} <= set(rep_local["learning_curves"])
