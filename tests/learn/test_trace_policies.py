"""The loop through traces for the stop decision: a learned policy acts in a live run, every decision
is recomputable from the recorded trace (no train/serve skew), banks and traces carry the same
data, and bad inputs fail with the file named."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from stopkit import vote_config
from typer.testing import CliRunner

from orchestrace.cli import app, main
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.io import load_one
from orchestrace.learn import load_policy
from orchestrace.learn.stopping.banks import default_bank
from orchestrace.learn.stopping.features import features, features_hash, prefix_features, replay_table
from orchestrace.learn.stopping.policy import StopPolicy
from orchestrace.learn.stopping.traces import bank_from_traces, bank_to_traces, episode_from_trace
from orchestrace.learn.stopping.training import train_policy
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.runner import run

BUDGET = 6


@pytest.fixture(scope="module")
def policy_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A stop policy trained (exact PG, a few iterations) on 40 antonym questions, budget 6."""
    bank = default_bank("antonyms").subset(range(40))
    pol, _ = train_policy(bank, 0.02, algo="exact", budget=BUDGET, iterations=25, seed=0)
    path = str(tmp_path_factory.mktemp("pol") / "stop")
    pol.save(path)
    return path


def _config(qi: int, width: int) -> dict:
    return vote_config("antonyms", qi, BUDGET, width)


def _backend(answers: list[str], seed: int) -> ScriptedBackend:
    """Workers answer from ``answers`` (seeded per call), with seeded delays so a wave's workers
    finish in a shuffled order."""
    return ScriptedBackend(choices=answers, seed=seed, delay=lambda req: (req.seed % 97) / 97 * 0.02)


@pytest.mark.parametrize("width", [1, 3])
def test_live_decisions_recompute_from_the_trace(policy_path: str, tmp_path: Path, width: int) -> None:
    pol = load_policy(policy_path)
    decided = 0
    for qi, answers in enumerate((["cold"], ["cold", "hot", "warm", "chilly", ""], ["cold", "cold", "hot"])):
        out = str(tmp_path / f"q{qi}-w{width}.events.jsonl")
        run(
            "vote",
            out,
            config=_config(qi, width),
            backend=_backend(answers, qi),
            trace_policies={"stop": pol},
        )
        tr = load_one(out)
        ep = episode_from_trace(tr, out)
        assert ep.decisions, "the learned policy was asked at least once"
        # the offline view of the same answers: a bank question replayed in trace order
        from orchestrace.learn.stopping.banks import BankQuestion

        pt = replay_table(BankQuestion("q", "q", ep.gold, ep.answers), np.arange(len(ep.answers)))
        offline = features(pt, BUDGET)
        for d in ep.decisions:
            seen = [a for a, i in zip(ep.answers, ep.answer_index, strict=True) if i < d.index]
            assert len(seen) == d.samples
            x = prefix_features(seen, BUDGET)
            assert features_hash(x) == d.features_hash  # recomputed from the trace == what the run saw
            assert features_hash(offline[d.samples - 1]) == d.features_hash  # == what training sees
            p = float(pol.policy.stop_prob(x[None])[0])
            assert d.act == (p >= 0.5) and d.prob == pytest.approx(p if d.act else 1 - p, abs=1e-6)
            assert d.policy == "stop"
            decided += 1
        stops = [d for d in ep.decisions if d.act]
        outcome = (tr.metadata or {})["outcome"]
        if stops:  # the policy ended the run: nothing was asked after, the reason names it
            assert stops[-1] is ep.decisions[-1] and outcome["stop_reason"] == "policy:stop"
        else:
            assert outcome["stop_reason"] == "budget" and len(ep.answers) == BUDGET
    assert decided >= 3


def test_unanimous_answers_stop_early(policy_path: str, tmp_path: Path) -> None:
    """Trained with a cost of 0.02 per sample, the policy stops a unanimous run before the budget."""
    out = str(tmp_path / "u.events.jsonl")
    run(
        "vote",
        out,
        config=_config(0, 1),
        backend=_backend(["cold"], 0),
        trace_policies={"stop": load_policy(policy_path)},
    )
    ep = episode_from_trace(load_one(out), out)
    assert len(ep.answers) < BUDGET and ep.decisions[-1].act


def test_bank_to_traces_and_back_is_lossless_and_trains_the_same(tmp_path: Path) -> None:
    bank = default_bank("antonyms").subset(range(12))
    paths = bank_to_traces(bank, str(tmp_path / "traces"))
    assert len(paths) == 12
    back = bank_from_traces(str(tmp_path / "traces" / "*.events.jsonl"))
    assert sorted((q.to_json() for q in back.questions), key=lambda d: d["id"]) == sorted(
        (q.to_json() for q in bank.questions), key=lambda d: d["id"]
    )
    assert back.name == bank.name


def test_train_stop_bank_and_traces_give_the_same_policy(tmp_path: Path) -> None:
    runner = CliRunner()
    bank_file = str(tmp_path / "ant.jsonl")
    from orchestrace.learn.stopping.banks import save_bank

    save_bank(default_bank("antonyms").subset(range(16)), bank_file)
    assert runner.invoke(app, ["bank", "traces", bank_file, "-o", str(tmp_path / "tr")]).exit_code == 0
    common = ["--budget", "6", "--iterations", "5", "--sweep", "", "--no-aggregate", "--target-samples", "0",
              "--orders", "1"]  # fmt: skip
    a = runner.invoke(app, ["train", "stop", "--bank", bank_file, "-o", str(tmp_path / "a" / "p"), *common])
    b = runner.invoke(
        app,
        [
            "train",
            "stop",
            "--traces",
            str(tmp_path / "tr" / "*.events.jsonl"),
            "-o",
            str(tmp_path / "b" / "p"),
            *common,
        ],
    )
    assert a.exit_code == 0, a.output
    assert b.exit_code == 0, b.output
    # the held-out 30% is named once as the test part of its family (was "antonyms-test-test": the
    # calibration/reported halving appended the suffix a second time)
    for res in (a, b):
        assert re.search(r"held-out \w+-test \(", res.output) and "test-test" not in res.output, res.output
    pa, pb = StopPolicy.load(str(tmp_path / "a" / "p")), StopPolicy.load(str(tmp_path / "b" / "p"))
    assert pa.config == pb.config
    for (wa, ba), (wb, bb) in zip(pa.weights, pb.weights, strict=True):
        assert np.array_equal(wa, wb) and np.array_equal(ba, bb)


# ------------------------------------------------------------------ bad input


def _cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    """The real entry point: an error is one line on stderr and the exit code."""
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return int(e.value.code or 0), " ".join((cap.out + cap.err).split())


def _run_vote(capsys: pytest.CaptureFixture[str], policy: str, out: Path) -> tuple[int, str]:
    """`run vote` on the scripted backend with one `--policy` option."""
    args = [*"run vote --backend scripted --set".split(), 'question="q?"', "--policy", policy, "-o", str(out)]
    return _cli(capsys, args)


def test_policy_for_another_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from orchestrace.learn.rl.rollouts import NumpyPolicy, PolicyMeta

    p = tmp_path / "retry"
    NumpyPolicy(
        PolicyMeta("RetryStop", 3, 2, [4]), [(np.zeros((4, 3)), np.zeros(4)), (np.zeros((2, 4)), np.zeros(2))]
    ).save(p)
    out = tmp_path / "run.events.jsonl"
    code, text = _run_vote(capsys, f"stop={p}", out)
    assert code == 1 and "answers 'retry_stop', not 'stop'" in text and "retry.safetensors" in text
    assert not out.exists()


def test_corrupt_policy_file(tmp_path: Path, policy_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(Path(policy_path + ".safetensors").read_bytes()[:40])
    out = tmp_path / "run.events.jsonl"
    code, text = _run_vote(capsys, f"stop={bad}", out)
    assert code == 1 and "not a safetensors file" in text and "bad.safetensors" in text
    assert not out.exists()


def test_decision_the_program_cannot_learn(
    tmp_path: Path, policy_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run.events.jsonl"
    code, text = _run_vote(capsys, f"delegate={policy_path}", out)
    assert code == 1 and "--policy delegate=...: this policy file answers 'stop', not 'delegate'" in text
    assert not out.exists()
    with pytest.raises(OrchestraceError, match="DECISION=PATH"):
        from orchestrace.learn.policies import load_trace_policies

        load_trace_policies([policy_path])


def test_traces_without_vote_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = tmp_path / "c.events.jsonl"
    run("centralized", str(t), backend={"kind": "scripted", "seed": 0}, clock="logical")
    out = tmp_path / "p"
    code, text = _cli(
        capsys,
        [
            "train",
            "stop",
            "--traces",
            str(t),
            "-o",
            str(out),
            "--budget",
            "4",
            "--sweep",
            "",
            "--no-aggregate",
        ],
    )
    assert code == 1 and "not a run of the vote program" in text and "c.events.jsonl" in text
    assert not os.path.exists(str(out) + ".safetensors")


def test_stop_policy_for_another_feature_set(
    tmp_path: Path, policy_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import json
    import shutil

    p = tmp_path / "old"
    shutil.copy(policy_path + ".safetensors", str(p) + ".safetensors")
    cfg = json.loads(Path(policy_path + ".json").read_text())
    cfg["features"] = cfg["features"][:-1]  # a policy saved when the stop features were one fewer
    (tmp_path / "old.json").write_text(json.dumps(cfg))
    out = tmp_path / "run.events.jsonl"
    code, text = _run_vote(capsys, f"stop={p}", out)
    assert code == 1 and "trained on a different feature set" in text and "old.json" in text
    assert not out.exists()
