"""The train/eval/bank commands on real files (CLI holds no logic; errors are one line)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from orchestrace.cli import app, main
from orchestrace.learn.stopping.banks import SynthParams, save_bank, synthetic_bank

runner = CliRunner()


def test_eval_stop_json_covers_every_baseline() -> None:
    r = runner.invoke(app, ["eval", "stop", "--bank", "countries", "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)
    names = {row["method"] for row in rows}
    assert {f"fixed-{k}" for k in range(1, 41)} <= names
    assert {"ac-beta(0.95)", "ac-dirichlet(0.95)", "esc(w=5)", "consol-sprt", "hindsight-oracle"} <= names
    assert all(set(row) == {"method", "accuracy", "mean_samples", "questions"} for row in rows)


def test_train_then_eval_with_policy(tmp_path, capsys) -> None:
    bank = tmp_path / "syn.jsonl"
    save_bank(synthetic_bank(60, SynthParams(samples=20), seed=2), str(bank))
    pol = tmp_path / "p"
    r = runner.invoke(
        app,
        [
            "train",
            "stop",
            "--bank",
            str(bank),
            "--iterations",
            "3",
            "--sweep",
            "",
            "-o",
            str(pol),
            "--seed",
            "1",
            "--budget",
            "20",
        ],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads((tmp_path / "report" / "report.json").read_text())
    # 70/30 held-out split; the 18 held-out questions split again into 9 calibration + 9 reported
    assert rep["train_questions"] == 42 and rep["calibration_questions"] == 9 and rep["eval_questions"] == 9
    lo, hi = rep["goal"]["accuracy_gap_ci95_points"]
    assert lo <= rep["goal"]["accuracy_gap_points"] <= hi and "paired 95% CI" in r.output
    assert (tmp_path / "report" / "pareto.png").stat().st_size > 1000
    assert (tmp_path / "report" / "learning_curves.png").is_file()
    # pareto.png marks every policy file the job wrote, and the output names each mark
    files = ["p", "p-target", "p-agg", "p-agg-target"]
    assert list(rep["policies_written"].values()) == [f"{tmp_path / f}.safetensors" for f in files]
    assert all(os.path.isfile(p) for p in rep["policies_written"].values())
    printed = " ".join(r.output.split())
    assert all(f"pareto.png mark {k}:" in printed for k in range(1, 5)) and "mark 5" not in printed
    for name, t in rep["targets"].items():  # the budget's policy said in words, not as bare c= values
        how = (
            "per question, the policy trained at"
            if t["mixture_cost"] is not None
            else "trained at sample price"
        )
        assert f"{name} for a budget of 5 samples ({how}" in printed
    # every file the job left on disk is named on a 'wrote' line (policies, plots, their JSON)
    on_disk = {str(p) for p in tmp_path.rglob("*") if p.is_file() and p != bank}
    named = {line.split(" ", 1)[1] for line in r.output.splitlines() if line.startswith("wrote ")}
    assert len(on_disk) == 17 and named == on_disk  # with the run records p.run.json, report/run.json
    assert rep["aggregator_file"] == str(tmp_path / "p-aggregator.safetensors")
    r = runner.invoke(
        app, ["eval", "stop", "--bank", str(bank), "--policy", str(pol), "--budget", "20", "--format", "json"]
    )
    assert r.exit_code == 0, r.output
    assert "learned" in {row["method"] for row in json.loads(r.output)}
    # the learned-aggregator policy is written next to it and reported with its own goal figures
    results = {row["method"]: row for row in rep["results"]}
    assert {"learned", "learned+agg"} <= set(results)
    # its goal figures are the learned+agg row's (rows keep 6 decimals), against fixed-20 (the
    # largest fixed-k at budget 20)
    ga, agg = rep["goal_with_aggregator"], results["learned+agg"]
    six = pytest.approx(agg["mean_samples"], abs=1e-6), pytest.approx(agg["accuracy"], abs=1e-6)
    assert (ga["learned_mean_samples"], ga["learned_accuracy"]) == six
    assert ga["fixed_full_accuracy"] == pytest.approx(results["fixed-20"]["accuracy"], abs=1e-6)
    assert ga["sample_reduction_x"] == pytest.approx(20 / ga["learned_mean_samples"])
    # both families also get a policy for the default budget of 5 mean samples, saved beside
    assert set(rep["targets"]) == {"learned", "learned+agg"} and rep["target_samples"] == 5
    for t in rep["targets"].values():  # 3 iterations may leave a policy that overspends at any cost
        assert t["met"] == (t["calibration_mean_samples"] <= 5)
        assert t["met"] or abs(t["cost"] - 0.05) < 1e-12
    assert (tmp_path / "p-target.safetensors").is_file() and (tmp_path / "p-agg-target.json").is_file()
    assert {"learned(target=5)", "learned+agg(target=5)"} <= {row["method"] for row in rep["results"]}
    for t, f in [(rep["targets"]["learned"], "p-target"), (rep["targets"]["learned+agg"], "p-agg-target")]:
        saved = json.loads((tmp_path / f"{f}.json").read_text())  # a mixture is saved as one
        assert saved["mixture"] == (
            None if t["mixture_cost"] is None else {"prob": t["mixture_prob"], "cost": t["mixture_cost"]}
        )
        r = runner.invoke(
            app, ["eval", "stop", "--bank", str(bank), "--policy", str(tmp_path / f), "--budget", "20"]
        )
        assert r.exit_code == 0, r.output
    r = runner.invoke(
        app,
        ["eval", "stop", "--bank", str(bank), "--policy", str(tmp_path / "p-agg"), "--budget", "20"]
        + ["--orders", "3", "--format", "json"],
    )
    assert r.exit_code == 0, r.output
    rows = {row["method"]: row for row in json.loads(r.output)}
    # 60 questions x 3 orders: every accuracy is a multiple of 1/180
    assert all(abs(row["accuracy"] * 180 - round(row["accuracy"] * 180)) < 1e-3 for row in rows.values())
    # the aggregator beside the policies is named for what it is (was "PolicyConfig.__init__() got an
    # unexpected keyword argument 'priors'")
    with pytest.raises(SystemExit) as e:
        main(
            [
                "eval",
                "stop",
                "--bank",
                str(bank),
                "--policy",
                str(tmp_path / "p-aggregator"),
                "--budget",
                "20",
            ]
        )
    text = " ".join(capsys.readouterr().err.split())
    assert (
        e.value.code == 1
        and "OT606" in text
        and "an answer aggregator" in text
        and "not a stop policy" in text
    )
    assert "p-aggregator.safetensors" in text and "priors" not in text


@pytest.mark.parametrize(
    ("args", "code", "word"),
    [(["--sweep", "0.1,abc"], "OT631", "abc"), (["--algo", "[b]sac"], "OT630", "[b]sac")],
)
def test_bad_train_option_is_a_clear_error(args, code, word) -> None:
    cmd = [sys.executable, "-c", "from orchestrace.cli import main; main()", "train", "stop", *args]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 2 and code in p.stderr and word in p.stderr and "Traceback" not in p.stderr
    assert "━" not in p.stderr  # refused before any training starts


def test_user_errors_are_one_line(tmp_path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "question": "q", "samples": "x"}\n')
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            "from orchestrace.cli import main; main()",
            "eval",
            "stop",
            "--bank",
            str(bad),
        ],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 1  # a bad input file, as validate exits on a bad trace
    assert "Traceback" not in p.stderr and "bad.jsonl" in p.stderr and "line 1" in p.stderr


def test_a_policy_folder_refuses_another_run_and_force_replaces_it_whole(tmp_path, capsys) -> None:
    # the README's loop (`train stop --traces ... -o runs/stop/policy`) replaced the main job's
    # policies and report but left its -agg policies: eval stop and report read a mix of two runs
    bank = tmp_path / "syn.jsonl"
    save_bank(synthetic_bank(40, SynthParams(samples=12), seed=2), str(bank))
    out = tmp_path / "stop" / "policy"
    common = ["train", "stop", "--bank", str(bank), "--iterations", "2", "--sweep", "", "--budget", "12"]
    common += ["--target-samples", "0", "--orders", "1"]

    def train(*extra: str) -> tuple[int, str]:
        with pytest.raises(SystemExit) as e:
            main([*common, *extra])
        cap = capsys.readouterr()
        return int(e.value.code or 0), " ".join((cap.out + cap.err).split())

    def main_quiet(args: list[str]) -> int:
        with pytest.raises(SystemExit) as e:
            main(args)
        capsys.readouterr()
        return int(e.value.code or 0)

    def snapshot() -> dict[str, bytes]:
        return {str(p): p.read_bytes() for p in sorted((tmp_path / "stop").rglob("*")) if p.is_file()}

    assert train("-o", str(out))[0] == 0
    first = snapshot()
    assert str(out) + "-agg.safetensors" in first and str(tmp_path / "stop" / "report" / "run.json") in first
    code, text = train("-o", str(out))  # the same command again is the same run: rewritten
    assert code == 0, text
    code, text = train("-o", str(out), "--no-aggregate", "--seed", "3")
    assert (
        code == 1
        and "OT632" in text
        and "policy.run.json" in text
        and "holds the output of another run" in text
    )
    assert "aggregate (True, now False)" in text and "seed (0, now 3)" in text and "--force" in text
    assert snapshot().keys() == first.keys()  # nothing written, nothing removed
    # another name in the same folder still shares the default report folder
    code, text = train("-o", str(tmp_path / "stop" / "other"), "--no-aggregate")
    assert code == 1 and "OT632" in text and "report/run.json" in text
    assert not (tmp_path / "stop" / "other.safetensors").exists()
    # --force replaces the old run whole: no -agg policy or aggregator of it is left, nor what
    # `orchestrace report` drew from it
    assert main_quiet(["report", str(tmp_path / "stop")]) == 0
    assert (tmp_path / "stop" / "report" / "report.html").exists()
    code, text = train("-o", str(out), "--no-aggregate", "--seed", "3", "--force")
    assert code == 0, text
    left = {os.path.basename(p) for p in snapshot()}
    assert not any("-agg" in name for name in left) and "report.html" not in left, left
    assert {"policy.safetensors", "policy.json", "policy.run.json", "report.json", "run.json"} <= left
    report = json.loads((tmp_path / "stop" / "report" / "report.json").read_text())
    assert report["seed"] == 3 and report["aggregator"] is None
    # files no recorded run wrote (an older version's folder) are refused too
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "policy.safetensors").write_bytes(b"x")
    code, text = train("-o", str(tmp_path / "old" / "policy"))
    assert code == 1 and "no recorded run of `train stop` wrote" in text and "old/policy.safetensors" in text
