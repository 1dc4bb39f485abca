"""``loop stop``'s model update (stopping/answer_model.py) and ``train stop --traces --logged``,
which trains on the loop's own runs (they stop early and draw a question twice, so they are no
bank: OT612 / OT616 before)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from orchestrace.core.io import load_one
from orchestrace.learn.stopping.answer_model import (
    count_state,
    fit_answer_model,
    model_arrays,
    model_update,
    policy_value,
)
from orchestrace.learn.stopping.banks import BankQuestion
from orchestrace.learn.stopping.features import feature_names, prefix_features
from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
from orchestrace.learn.stopping.traces import VoteEpisode, episode_from_trace, record_question


def recorded(tmp: Path, qid: str, gold: str, answers: list[str], probs: list[float]) -> VoteEpisode:
    """A run that continued after every answer but the last, where it stopped; ``probs``: the
    recorded probability of each action taken."""
    acts = [(False, p) for p in probs[:-1]] + [(True, probs[-1])]
    path = record_question(BankQuestion(qid, "?", gold, answers), str(tmp), "b", 0, None, decisions=acts)
    return episode_from_trace(load_one(path), path)


def policy(seed: int = 0) -> StopPolicy:
    return StopPolicy.init(PolicyConfig(features=feature_names(False), budget=4, cost=0.01), seed)


def test_counts_are_the_state_and_every_prefix_shows_its_stop_reward(tmp_path: Path) -> None:
    assert count_state(["b", "a", "b", None]) == ((2, 1), 1) == count_state(["a", "b", None, "a"])
    runs = [
        recorded(tmp_path / "1", "q1", "g", ["g", "x", "x"], [0.5, 0.5, 0.5]),
        recorded(tmp_path / "2", "q2", "g", ["g", "g"], [0.5, 0.5]),
    ]
    m = fit_answer_model(runs, budget=4, cost=0.01)
    # after one answer: right in both runs, though neither stopped there
    assert m.visits[((1,), 0)] == 2 and m.q_stop(((1,), 0)) == pytest.approx(1 - 0.01)
    # two different answers: the tie goes to the first, g; then x, x outvotes it
    assert m.q_stop(((1, 1), 0)) == pytest.approx(1 - 0.02) and m.q_stop(((2, 1), 0)) == pytest.approx(-0.03)
    assert m.next_states[((1,), 0)] == {((1, 1), 0): 1, ((2,), 0): 1}
    assert not m.next_states[((2,), 0)]  # the second run stopped there: the frontier
    import torch

    def value(p_stop: float, known: int = 1) -> float:
        arrays = model_arrays(m, known)
        return float(policy_value(torch.full((len(arrays.states),), p_stop, dtype=torch.float64), arrays, 4))

    assert value(1.0) == pytest.approx(1 - 0.01)  # always stop: what one answer earns
    # never stop: each run reaches the last state it recorded, the frontier, where continuing is
    # valued optimistically (right after one more answer): 1 - 4 x 0.01 and 1 - 3 x 0.01
    assert value(0.0) == pytest.approx(np.mean([1 - 0.04, 1 - 0.03]))
    # trusted only after two runs went on: one answer is, the next states are the frontier
    assert value(0.0, known=2) == pytest.approx(1 - 0.03)


def test_the_recording_policy_does_not_weigh(tmp_path: Path) -> None:
    """The answers do not depend on the decisions: the same answers recorded by a policy that
    rarely continued and by one that nearly always did give the same model and the same update
    (the importance-weighted update moves differently on them, tests/learn/test_loop.py)."""
    answers = [("q1", "g", ["x", "g", "g"]), ("q2", "g", ["g", "g"]), ("q3", "h", ["h", "x", "x"])]
    pol = policy()
    news = []
    for name, p in (("rare", 0.05), ("often", 0.95)):
        runs = [recorded(tmp_path / name, q, g, a, [p] * len(a)) for q, g, a in answers]
        news.append(model_update(pol, fit_answer_model(runs, 4, 0.01), steps=20)[0])
    for (w1, b1), (w2, b2) in zip(news[0].weights, news[1].weights, strict=True):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)


def test_update_continues_where_runs_found_the_gold(tmp_path: Path) -> None:
    """Runs whose first answer was wrong and whose later ones outvoted it: continuing after one
    answer pays, so P(stop) there falls and the policy's value under the fitted process rises."""
    runs = [recorded(tmp_path, f"q{k}", "g", ["x", "g", "g"], [0.5] * 3) for k in range(4)]
    runs += [recorded(tmp_path, f"r{k}", "g", ["g", "g"], [0.5] * 2) for k in range(2)]
    pol = policy(1)
    x = prefix_features(["x"], 4)[None]
    new, figures = model_update(pol, fit_answer_model(runs, 4, 0.01), steps=100)
    assert new.stop_prob(x)[0] < pol.stop_prob(x)[0]
    assert figures.model_value > figures.model_value_before and figures.explored_states >= 2


def test_train_stop_logged_reads_loop_runs(tmp_path: Path) -> None:
    """``train stop --traces`` on ``loop stop``'s runs: refused as a bank with a pointer to
    ``--logged``, trained as they happened with it (the loop's own update, from its start policy)."""
    from typer.testing import CliRunner

    from orchestrace.cli import app
    from orchestrace.learn.loop import completed
    from orchestrace.learn.stopping.loop_stop import StopLoopConfig, train_on_runs

    loop = tmp_path / "loop"
    args = ["loop", "stop", "--backend", "scripted", "--questions", "3", "--budget", "4", "--iterations", "2"]
    r = CliRunner().invoke(app, [*args, "-o", str(loop), "--log", "tensorboard"])
    assert r.exit_code == 0, r.output
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(loop / "tensorboard"))  # the model update's figures, per update
    acc.Reload()
    for tag in ("train/model_value", "train/approx_kl", "train/entropy", "train/explored_states"):
        assert [e.step for e in acc.Scalars(tag)] == [1, 2], tag
    assert all(0 <= e.value < 0.7 for e in acc.Scalars("train/entropy"))  # of P(stop), at most ln 2
    glob = str(loop / "iter-*" / "run-*.events.jsonl")
    r = CliRunner().invoke(
        app, ["train", "stop", "--traces", glob, "--budget", "4", "-o", str(tmp_path / "bank")]
    )
    assert r.exit_code != 0 and getattr(r.exception, "code", None) in ("OT612", "OT616")
    assert "--logged" in str(r.exception)
    assert not (tmp_path / "bank.safetensors").exists()
    start = loop / "start-policy.safetensors"
    out = tmp_path / "offline"
    r = CliRunner().invoke(
        app,
        [
            "train",
            "stop",
            "--traces",
            glob,
            "--logged",
            "--start",
            str(start),
            "--iterations",
            "2",
            "-o",
            str(out),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "on 6 recorded runs" in r.output
    got = StopPolicy.load(str(out) + ".safetensors")
    paths = [p for rec in completed(loop) for p in rec.traces]
    runs = [(load_one(p), episode_from_trace(load_one(p), p)) for p in paths]
    want = train_on_runs(StopPolicy.load(str(start)), runs, StopLoopConfig(budget=4, cost=0.01), 2)
    for (w1, b1), (w2, b2) in zip(got.weights, want.weights, strict=True):
        assert np.array_equal(w1, w2) and np.array_equal(b1, b2)


def test_train_stop_logged_refuses_bad_input_before_writing(tmp_path: Path) -> None:
    """``--logged`` without ``--traces`` (OT631), an unknown ``--update`` (OT631), runs recorded with
    another budget than the start policy's (OT617, names the run): no policy written."""
    from typer.testing import CliRunner

    from orchestrace.cli import app

    start = tmp_path / "start"
    policy().save(str(start))  # budget 4
    recorded(tmp_path / "runs", "q1", "g", ["g", "g", "x"], [0.5] * 3)  # recorded with budget 3
    glob = str(tmp_path / "runs" / "*.events.jsonl")
    out = tmp_path / "out"
    logged = ["train", "stop", "--logged", "--start", str(start) + ".safetensors", "-o", str(out)]
    cases = [(logged, "OT631"), ([*logged, "--traces", glob, "--update", "adam"], "OT631"),
             ([*logged, "--traces", glob], "OT617")]  # fmt: skip
    for args, code in cases:
        r = CliRunner().invoke(app, args)
        assert r.exit_code == 1 and getattr(r.exception, "code", None) == code, (args, r.exception)
        assert not (tmp_path / "out.safetensors").exists()
    assert "q1.events.jsonl" in str(r.exception) and "budget 3" in str(r.exception)
