"""The generic loop driver: per-iteration folders, curves, and resumption after the last completed iteration."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.loop import completed, run_loop


class Counter:
    """A 'policy' is a JSON file holding a number; each update adds the number of traces collected."""

    def __init__(self) -> None:
        self.collected: list[tuple[int, str | None]] = []

    def collect(self, iteration: int, policy: str | None, out_dir: Path) -> list[str]:
        self.collected.append((iteration, policy))
        paths = []
        for k in range(2):
            p = out_dir / f"run-{k}.events.jsonl"
            p.write_text("{}\n")
            paths.append(str(p))
        return paths

    def update(
        self, iteration: int, policy: str | None, traces: list[str], out_dir: Path
    ) -> tuple[str, dict[str, float]]:
        value = json.loads(Path(policy).read_text())["value"] if policy else 0
        p = out_dir / "policy.json"
        p.write_text(json.dumps({"value": value + len(traces)}))
        return str(p), {"reward": float(iteration)}

    def evaluate(self, policy: str | None, out_dir: Path) -> dict[str, float]:
        return {"value": float(json.loads(Path(policy).read_text())["value"]) if policy else 0.0}


def test_loop_writes_iterations_curves_and_resumes(tmp_path: Path) -> None:
    step = Counter()
    recs = run_loop(step, tmp_path, 2)
    assert [r.iteration for r in recs] == [0, 1, 2]
    assert [r.eval["value"] for r in recs] == [0.0, 2.0, 4.0]
    assert step.collected[0] == (1, None)
    assert step.collected[1] == (2, str(tmp_path / "iter-001" / "policy.json"))
    curves = json.loads((tmp_path / "curves.json").read_text())
    assert [c["eval_value"] for c in curves] == [0.0, 2.0, 4.0]
    assert (tmp_path / "curves.png").stat().st_size > 0
    # a killed third iteration left a folder without its record: resuming redoes only it
    (tmp_path / "iter-003").mkdir()
    (tmp_path / "iter-003" / "junk").write_text("x")
    step2 = Counter()
    recs = run_loop(step2, tmp_path, 3)
    assert step2.collected == [(3, str(tmp_path / "iter-002" / "policy.json"))]
    assert [r.eval["value"] for r in recs] == [0.0, 2.0, 4.0, 6.0]
    assert not (tmp_path / "iter-003" / "junk").exists()
    assert len(completed(tmp_path)) == 4


def test_unreadable_iteration_record_names_the_file(tmp_path: Path) -> None:
    run_loop(Counter(), tmp_path, 1)
    bad = tmp_path / "iter-001" / "iteration.json"
    bad.write_text("{not json")
    with pytest.raises(OrchestraceError) as e:
        run_loop(Counter(), tmp_path, 2)
    assert str(bad) in str(e.value)


def test_loop_stop_two_iterations_scripted_and_resumes(tmp_path: Path) -> None:
    """``orchestrace loop stop`` on a tiny config: traces, policy and figures per iteration; a
    second call with more iterations resumes after the last completed one."""
    from typer.testing import CliRunner

    from orchestrace.cli import app
    from orchestrace.core.io import load_one
    from orchestrace.learn.stopping.traces import episode_from_trace

    out = tmp_path / "loop"
    args = ["loop", "stop", "--backend", "scripted", "--questions", "3", "--budget", "4", "-o", str(out)]
    r = CliRunner().invoke(app, [*args, "--iterations", "2"])
    assert r.exit_code == 0, r.output
    recs = completed(out)
    assert [x.iteration for x in recs] == [0, 1, 2]
    for x in recs[1:]:
        assert len(x.traces) == 3 and x.policy and Path(x.policy).exists()
        eps = [episode_from_trace(load_one(p), p) for p in x.traces]
        assert all(ep.decisions for ep in eps)  # the learned policy acted in every run
        assert x.train["mean_samples"] == sum(len(ep.answers) for ep in eps) / 3
        assert 0.0 <= x.eval["accuracy"] <= 1.0 and 1.0 <= x.eval["mean_samples"] <= 4.0
    curves = json.loads((out / "curves.json").read_text())
    assert [c["iteration"] for c in curves] == [0, 1, 2]
    first = (out / "iter-001" / "iteration.json").read_text()
    r = CliRunner().invoke(app, [*args, "--iterations", "3"])
    assert r.exit_code == 0, r.output
    assert (out / "iter-001" / "iteration.json").read_text() == first  # not redone
    assert [x.iteration for x in completed(out)] == [0, 1, 2, 3]


def test_stop_update_moves_by_the_credit_not_past_the_clip(tmp_path: Path) -> None:
    """A batch whose only credit is the cost of one answer that changed nothing (continue at one
    answer, stop at two agreeing ones: -0.01 each) may lower P(continue) at one answer by about
    the clip at most. The Adam update it replaces took P(stop) there from 0.497 to 0.9999 in one
    update, and a policy that always stops never moves again (every credit is 0)."""

    from orchestrace.core.io import load_one
    from orchestrace.learn.stopping.banks import BankQuestion
    from orchestrace.learn.stopping.features import feature_names, prefix_features
    from orchestrace.learn.stopping.loop_stop import decision_credit, importance_weighted_update
    from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
    from orchestrace.learn.stopping.traces import episode_from_trace, record_question

    pol = StopPolicy.init(PolicyConfig(features=feature_names(False), budget=8, cost=0.01), 0)
    one, two = (float(pol.stop_prob(prefix_features(a, 8)[None])[0]) for a in (["x"], ["x", "x"]))

    def run(k: int) -> tuple:
        q = BankQuestion(f"q{k}", "?", "x", ["x", "x", "x"])
        path = record_question(q, str(tmp_path), "b", k, None, decisions=[(False, 1 - one), (True, two)])
        trace = load_one(path)
        return trace, episode_from_trace(trace, path)

    runs = [run(k) for k in range(12)]
    trace, ep = runs[0]
    assert ep.answers == ["x", "x"] and [d.act for d in ep.decisions] == [False, True]
    # continuing bought a second answer that changed nothing; stopping where it stopped, nothing
    assert decision_credit(trace, ep, 0.01) == pytest.approx(
        {ep.decisions[0].event: -0.01, ep.decisions[1].event: 0.0}
    )
    new, figures = importance_weighted_update(
        pol, runs, [], cost=0.01, lr=1.0, epochs=20, clip=0.2, max_weight=2.0
    )
    assert figures.reward == pytest.approx(0.98) and figures.mean_weight == pytest.approx(1.0, rel=1e-5)
    after = float(new.stop_prob(prefix_features(["x"], 8)[None])[0])
    assert after > one  # the credit says: stop
    # P(continue) ends at the clip's edge, 0.8 of where it started (a last step may pass it a little)
    assert 1 - after == pytest.approx(0.8 * (1 - one), rel=0.02)
    # --target-kl: the second step would start past a KL of 1e-12, so it is not taken
    _, stopped = importance_weighted_update(
        pol, runs, [], cost=0.01, lr=1.0, epochs=20, clip=0.2, max_weight=2.0, target_kl=1e-12
    )
    assert figures.steps == 20 and stopped.steps == 1 and stopped.approx_kl > 1e-12


def test_reused_runs_count_by_their_recorded_probability(tmp_path: Path) -> None:
    """The importance-weighted update (stopping/offpolicy.py) weights each decision by the current
    policy's probability of the recorded action over the one the trace recorded: the same runs,
    recorded by a policy that nearly always continued after one answer (weight about 0.5), move
    P(stop) after one answer less than when recorded by the current policy itself (weight 1).
    With the weights dropped both updates would be equal."""
    import numpy as np

    from orchestrace.core.io import load_one
    from orchestrace.learn.stopping.banks import BankQuestion
    from orchestrace.learn.stopping.features import feature_names, prefix_features
    from orchestrace.learn.stopping.loop_stop import decision_batch, importance_weighted_update
    from orchestrace.learn.stopping.offpolicy import importance_weights
    from orchestrace.learn.stopping.policy import PolicyConfig, StopPolicy
    from orchestrace.learn.stopping.traces import episode_from_trace, record_question

    pol = StopPolicy.init(PolicyConfig(features=feature_names(False), budget=8, cost=0.01), 0)
    one, two = (float(pol.stop_prob(prefix_features(a, 8)[None])[0]) for a in (["x"], ["x", "y"]))

    def runs(p_continue: float, folder: str) -> list:
        """Continuing after a wrong first answer found the gold (credit +0.98 and +0.99)."""
        out = []
        for k in range(6):
            q = BankQuestion(f"q{k}", "?", "g", ["a", "g", "g"])
            path = record_question(q, str(tmp_path / folder), "b", k, None,
                                   decisions=[(False, p_continue), (False, 1 - two), (True, 0.5)])  # fmt: skip
            trace = load_one(path)
            out.append((trace, episode_from_trace(trace, path)))
        return out

    own, other = runs(1 - one, "own"), runs(0.999, "other")
    x, a, _, prob = decision_batch(other, 8, 0.01)
    w = importance_weights(pol, x, a, prob, max_weight=2.0)
    assert w[0] == pytest.approx((1 - one) / 0.999, rel=1e-5) and w[1] == pytest.approx(1.0, rel=1e-5)
    assert importance_weights(pol, x[:1], a[:1], np.array([0.05]), 2.0)[0] == 2.0  # truncated
    after = {}
    for name, batch in (("own", own), ("other", other)):
        new, figures = importance_weighted_update(pol, batch[:3], batch[3:], 0.01, 0.3, 5, 0.2, 2.0)
        assert figures.replayed_runs == 6 and figures.decisions == 9 and figures.replayed_decisions == 18
        after[name] = float(new.stop_prob(prefix_features(["x"], 8)[None])[0])
    assert after["own"] < after["other"] < one  # both continue more; the rarely-taken-now runs less


def test_loop_stop_is_reproducible_by_seed(tmp_path: Path) -> None:
    """Two tiny ``loop stop`` runs with one seed write the same policies and figures, the second
    update reusing the first iteration's runs (window 0: every recorded run)."""
    from typer.testing import CliRunner

    from orchestrace.cli import app
    from orchestrace.learn.stopping.policy import StopPolicy

    def run(name: str) -> list:
        out = tmp_path / name
        args = ["loop", "stop", "--backend", "scripted", "--questions", "3", "--budget", "4", "--seed", "5"]
        r = CliRunner().invoke(app, [*args, "--iterations", "2", "-o", str(out)])
        assert r.exit_code == 0, r.output
        return completed(out)

    first, second = run("a"), run("b")
    timing = {"rollout_s", "rollout_tokens_per_s"}  # wall-clock figures: never the same twice

    def figures(recs: list) -> list[dict]:
        return [{k: v for k, v in r.train.items() if k not in timing} for r in recs]

    assert figures(first) == figures(second) and timing <= set(first[1].train)
    assert [r.eval for r in first] == [r.eval for r in second]
    assert first[2].train["replayed_runs"] == 6
    for r1, r2 in zip(first[1:], second[1:], strict=True):
        w1, w2 = (StopPolicy.load(r.policy).weights for r in (r1, r2))
        assert all((a == b).all() and (c == d).all() for (a, c), (b, d) in zip(w1, w2, strict=True))


@pytest.mark.parametrize(
    ("record", "said"),
    [
        # each reached the readers of the figures (eval team, bench team, a resume) as an internal
        # error: a string indexed by a key, a str summed with a float, a UnicodeDecodeError
        (b'{"iteration": 1, "policy": null, "eval": "x"}', "Expected `object`, got `str` - at `$.eval`"),
        (b'{"iteration": 1, "policy": null, "train": {"reward": "0.5"}}', "Expected `float`, got `str`"),
        (b'{"iteration": 1, "policy": "\xff"}', "can't decode byte 0xff"),
        (b'{"iteration": 1.5, "policy": null}', "Expected `int`, got `float` - at `$.iteration`"),
        # pointed the readers at iter-007, which does not exist: "no shared held-out question"
        (b'{"iteration": 7, "policy": null}', "the record of iteration 1 says iteration 7"),
        # json's RecursionError escaped (found by bench/fuzz_hostile.py loop-records seed 50058)
        (
            b'{"iteration": 1, "policy": null, "eval": ' + b"[" * 5000 + b"]" * 5000 + b"}",
            "maximum recursion depth",
        ),
    ],
)
def test_an_iteration_record_of_the_wrong_shape_is_bad_input(
    tmp_path: Path, record: bytes, said: str
) -> None:
    run_loop(Counter(), tmp_path, 1)
    bad = tmp_path / "iter-001" / "iteration.json"
    bad.write_bytes(record)
    with pytest.raises(OrchestraceError, match=re.escape(said)) as e:
        completed(tmp_path)
    assert e.value.code == "OT680" and e.value.path == str(bad) and e.value.exit_code == 1


def test_a_nan_figure_the_writer_wrote_is_read_back(tmp_path: Path) -> None:
    run_loop(Counter(), tmp_path, 1)
    p = tmp_path / "iter-001" / "iteration.json"
    rec = json.loads(p.read_text())
    p.write_text(json.dumps({**rec, "train": {"loss": math.nan}}))  # as the loop's writer writes it
    assert math.isnan(completed(tmp_path)[1].train["loss"])


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        # NaN rewards, an "approx_kl nan" policy, an ascent turned descent: all exit 0 before
        (["--cost", "nan"], "--cost must be a finite number >= 0"),
        (["--update", "weighted", "--lr", "nan"], "--lr must be a finite number > 0, got nan"),
        (["--update", "weighted", "--lr", "-1"], "--lr must be a finite number > 0, got -1.0"),
    ],
)
def test_loop_stop_refuses_numbers_it_cannot_train_with(
    tmp_path: Path, capsys: pytest.CaptureFixture, extra: list[str], said: str
) -> None:
    from orchestrace.cli import main

    out = tmp_path / "loop"
    args = ["loop", "stop", "--backend", "scripted", "--questions", "2", "--budget", "3", "-k", "1"]
    with pytest.raises(SystemExit) as e:
        main([*args, "-o", str(out), *extra])
    assert e.value.code == 2 and f"OT631 error: {said}" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize(
    ("kw", "said"),
    [
        ({"cost": math.nan}, "--cost must be a finite number >= 0"),  # KeyError: 'learned', exit 3
        ({"budget": 1}, "--budget must be >= 2 samples, got 1"),  # log(1) = 0 divided, then IndexError
        ({"target_samples": math.nan}, "--target-samples must be a finite number > 0"),  # empty max()
        ({"sweep_costs": [math.inf]}, "--sweep must be a finite number >= 0"),
    ],
)
def test_train_stop_refuses_numbers_it_cannot_train_with(tmp_path: Path, kw: dict, said: str) -> None:
    from orchestrace.learn.stopping.training import train_stop

    bank = tmp_path / "b.jsonl"
    rows = [
        {"id": f"q{i}", "question": "q?", "gold": "a", "samples": ["a", "b", "a", "a"]} for i in range(12)
    ]
    bank.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = {"budget": 4, "sweep_costs": [], "out": str(tmp_path / "o" / "p"), "aggregate": False, "orders": 1}
    with pytest.raises(OrchestraceError, match=re.escape(said)) as e:
        train_stop([str(bank)], [str(bank)], **{**args, **kw})
    assert e.value.code == "OT631" and not (tmp_path / "o").exists()


def test_loop_stop_whose_every_run_failed_stops_with_the_cause(tmp_path: Path) -> None:
    """loop stop against a server nobody listens at trained on runs of null answers and exited 0."""
    import socket

    from orchestrace.learn.stopping.loop_stop import StopLoopConfig, loop_stop
    from orchestrace.runtime.runner import backend_spec

    with socket.socket() as s:  # a loopback port with nothing behind it
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    spec = backend_spec(base_url=f"http://127.0.0.1:{port}/v1", model="m")
    cfg = StopLoopConfig(iterations=1, questions=2, budget=3, backend=spec)
    with pytest.raises(OrchestraceError, match="every run of iteration 1 failed: .*connection") as e:
        loop_stop(cfg, str(tmp_path / "loop"))
    assert e.value.code == "OT619"
