"""--log tensorboard: every training command's per-iteration figures, read back with TensorBoard's
own reader (tensorboard's EventAccumulator, a test extra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.loop import IterationRecord, Panel, _panel_lines
from orchestrace.learn.scalar_log import child_run, log_scalars, open_log


def read_events(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_loop_stop_logs_each_iteration(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from orchestrace.cli import app

    out = tmp_path / "loop"
    args = ["loop", "stop", "--backend", "scripted", "--questions", "3", "--budget", "4", "-o", str(out)]
    r = CliRunner().invoke(app, [*args, "--iterations", "2", "--log", "tensorboard", "--update", "weighted"])
    assert r.exit_code == 0, r.output
    ev = read_events(out / "tensorboard")
    assert [s for s, _ in ev["heldout/accuracy"]] == [0, 1, 2]
    assert [s for s, _ in ev["train/mean_samples"]] == [1, 2]
    # the importance-weighted update's figures: the second update reused the first's 3 runs
    assert [v for _, v in ev["train/replayed_runs"]] == [3, 6] and len(ev["train/mean_weight"]) == 2
    assert [s for s, _ in ev["train/approx_kl"]] == [1, 2] and len(ev["train/clip_fraction"]) == 2
    assert [v for _, v in ev["train/steps"]] == [20, 20]  # every epoch: no --target-kl
    assert all(0 < v < 0.7 for _, v in ev["train/entropy"])  # of P(stop), at most ln 2
    assert len(ev["train/rollout_tokens_per_s"]) == 2
    assert len(ev["time/seconds_per_iteration"]) == 3 and all(
        v >= 0 for _, v in ev["time/seconds_per_iteration"]
    )
    recs = {x["iteration"]: x for x in __import__("json").loads((out / "curves.json").read_text())}
    for step, value in ev["heldout/accuracy"]:  # the same figures as curves.json
        assert value == pytest.approx(recs[step]["eval_accuracy"])


def test_ppo_policy_of_train_stop_logs_kl_clip_and_entropy(tmp_path: Path) -> None:
    from orchestrace.learn.stopping.banks import default_bank
    from orchestrace.learn.stopping.training import train_policy

    bank = default_bank("countries").subset(range(30))
    _, hist = train_policy(bank, 0.01, algo="ppo", iterations=3, perms=2, log="tensorboard", log_out=tmp_path)
    ev = read_events(tmp_path / "tensorboard" / "learned-c=0.01")
    assert [s for s, _ in ev["train/reward"]] == [1, 2, 3]
    assert [v for _, v in ev["train/reward"]] == pytest.approx([h["batch_reward"] for h in hist])
    for tag in ("train/approx_kl", "train/clip_fraction", "train/entropy"):
        assert len(ev[tag]) == 3, tag
    assert all(0 <= v <= 1 for _, v in ev["train/clip_fraction"])
    assert all(v > 0 for _, v in ev["train/entropy"])  # a Bernoulli stop policy, not yet certain


def test_target_kl_stops_the_epochs() -> None:
    """A target KL the second epoch cannot meet (1e-12) stops each update after its first epoch:
    another policy than with every epoch; the algorithms without epochs refuse it."""
    import numpy as np

    from orchestrace.learn.stopping.banks import default_bank
    from orchestrace.learn.stopping.training import train_policy

    bank = default_bank("countries").subset(range(30))
    free, _ = train_policy(bank, 0.01, algo="ppo", iterations=2, perms=2)
    again, _ = train_policy(bank, 0.01, algo="ppo", iterations=2, perms=2, target_kl=10.0)
    stopped, _ = train_policy(bank, 0.01, algo="ppo", iterations=2, perms=2, target_kl=1e-12)
    x = np.random.default_rng(0).random((5, len(free.config.features)), dtype=np.float32)
    assert np.array_equal(free.stop_prob(x), again.stop_prob(x))  # never reached: no change
    assert not np.allclose(free.stop_prob(x), stopped.stop_prob(x))
    with pytest.raises(OrchestraceError, match="applies to ppo and grpo"):
        train_policy(bank, 0.01, algo="exact", iterations=2, perms=2, target_kl=0.01)


def read_mlflow(out: Path) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Every run of ``out/mlflow/mlflow.db`` by name: its metrics' (step, value) histories, read
    with MLflow's own client."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("orchestrace")
    runs = {}
    for run in client.search_runs([exp.experiment_id]):
        hist = {k: client.get_metric_history(run.info.run_id, k) for k in run.data.metrics}
        runs[run.info.run_name] = {k: sorted((m.step, m.value) for m in h) for k, h in hist.items()}
    return runs


def test_loop_stop_logs_to_a_local_mlflow_store(tmp_path: Path) -> None:
    """--log mlflow: the same figures as curves.json, in a SQLite file under OUT, with MLflow's
    telemetry off (no network). Each policy a command trains (train stop's cost sweep, train
    retry's families) is its own run of the command's one store, and a run that logged nothing
    leaves none; non-finite figures are left out, as for TensorBoard."""
    import json

    from mlflow.telemetry.utils import is_telemetry_disabled
    from typer.testing import CliRunner

    from orchestrace.cli import app

    out = tmp_path / "loop"
    args = ["loop", "stop", "--backend", "scripted", "--questions", "3", "--budget", "4", "-o", str(out)]
    r = CliRunner().invoke(app, [*args, "--iterations", "2", "--log", "mlflow"])
    assert r.exit_code == 0, r.output
    assert is_telemetry_disabled() and not (out / "tensorboard").exists()
    runs = read_mlflow(out)
    assert list(runs) == ["loop"]  # one run, named after OUT
    ev = runs["loop"]
    recs = {x["iteration"]: x for x in json.loads((out / "curves.json").read_text())}
    assert [s for s, _ in ev["heldout/accuracy"]] == [0, 1, 2]
    for step, value in ev["heldout/accuracy"]:
        assert value == pytest.approx(recs[step]["eval_accuracy"])
    assert [s for s, _ in ev["train/approx_kl"]] == [1, 2] and len(ev["time/seconds_per_iteration"]) == 3

    with open_log("mlflow", out):  # the same store again: its runs are kept
        for name, reward in (("learned-c=0.01", 0.5), ("learned+agg-c=0.01", 0.75)):
            with child_run(name):
                for step in (1, 2):
                    log_scalars(step, {"reward": reward * step, "loss": float("nan")}, prefix="train/")
    runs = read_mlflow(out)
    assert set(runs) == {"loop", "learned-c=0.01", "learned+agg-c=0.01"}
    assert runs["learned+agg-c=0.01"]["train/reward"] == [(1, 0.75), (2, 1.5)]
    assert "train/loss" not in runs["learned-c=0.01"]


def test_unknown_log_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(OrchestraceError, match="unknown --log 'wandb'"):
        with open_log("wandb", tmp_path):
            pass
    assert not list(tmp_path.iterdir())


def test_nothing_is_written_without_a_log(tmp_path: Path) -> None:
    log_scalars(1, {"train/reward": 1.0})  # no open log: a no-op
    with open_log(None, tmp_path / "tb"):
        log_scalars(1, {"train/reward": 1.0})
    assert not (tmp_path / "tb").exists()


def test_team_iteration_line_says_what_matters() -> None:
    from orchestrace.learn.team.trainer import iteration_line

    rec0 = IterationRecord(
        0, None, eval={"team_accuracy": 0.4, "solver_accuracy": 0.35, "aggregator_accuracy": 0.4}
    )
    assert iteration_line(rec0) == "iteration 0: held-out team 0.400 (solvers 0.350, aggregator 0.400)"
    train = {
        "reward": 0.5625,
        "loss": 3e-7,
        "approx_kl": 2.5e-4,
        "clip_fraction": 0.012,
        "rollout_s": 4.0,
        "update_s": 6.5,
    }
    line = iteration_line(IterationRecord(1, "p", [], train, {}))
    assert line == "iteration 1: reward 0.562, KL 2.5e-04, clipped 1.2%, 10.5 s (rollouts 4.0 + update 6.5)"
    assert "loss" not in line


def test_curves_panel_lines_expand_agent_patterns() -> None:
    panel = Panel("advantage", [("train_*_advantage", "*"), ("train_reward", "reward")])
    keys = ["train_aggregator_advantage", "train_reward", "train_solver_0_advantage", "eval_team_accuracy"]
    assert _panel_lines(panel, keys) == [
        ("train_aggregator_advantage", "aggregator"),
        ("train_solver_0_advantage", "solver_0"),
        ("train_reward", "reward"),
    ]


@pytest.mark.parametrize("algo", ["ppo", "grpo"])
def test_target_kl_stops_the_epochs_of_the_gym_trainers(algo: str) -> None:
    """train delegate / swarm / retry train through ``rl.train_gym.train_policy``: a target the
    second epoch cannot meet changes the policy, one never reached does not."""
    import numpy as np

    from orchestrace.learn.datasets import RouteData
    from orchestrace.learn.envs.delegate import DelegateEnv
    from orchestrace.learn.rl.train_gym import train_policy

    n = 20
    quality = np.array([[0.0, 1.0] if i % 2 else [1.0, 1.0] for i in range(n)])
    data = RouteData("toy", [f"q{i}" for i in range(n)], [f"sky {i}" if i % 2 else f"prove {i}" for i in range(n)],
                     ["all"] * n, ["cheap", "strong"], quality, np.tile([0.001, 0.01], (n, 1)))  # fmt: skip

    def weights(target_kl: float | None) -> list[np.ndarray]:
        env = DelegateEnv(data, lam=0.5)
        res = train_policy(algo, env, [{"query": i} for i in range(n)], env_name="Delegate", iters=2, batch=16,
                           group=4, epochs=4, minibatches=2, target_kl=target_kl)  # fmt: skip
        return [x for w, b in res.policy.weights for x in (w, b)]

    free = weights(None)
    assert all(np.array_equal(a, b) for a, b in zip(free, weights(10.0), strict=True))
    assert not all(np.allclose(a, b) for a, b in zip(free, weights(1e-12), strict=True))


@pytest.mark.parametrize(
    ("cmd", "match"),
    [
        (["train", "swarm", "--algo", "reinforce", "--target-kl", "0.01"], "not reinforce"),
        (["train", "retry", "--algo", "exact", "--target-kl", "0.01"], "not exact"),
        (["train", "delegate", "--algo", "ppo", "--target-kl", "0"], "must be > 0"),
        (
            ["loop", "stop", "--backend", "scripted", "--update", "weighted", "--target-kl", "-1"],
            "must be > 0",
        ),
        (
            ["loop", "stop", "--backend", "scripted", "--target-kl", "0.01"],
            "the model update bounds its move",
        ),
    ],
)
def test_target_kl_without_epochs_is_refused_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cmd: list[str], match: str
) -> None:
    from orchestrace.cli import main

    with pytest.raises(SystemExit) as e:
        main([*cmd, "-o", str(tmp_path / "out")])
    err = " ".join(capsys.readouterr().err.split())
    assert e.value.code == 2 and "OT630" in err and match in err, err
    assert not (tmp_path / "out").exists()


def test_gym_trainers_log_heldout_figures_and_train_the_same(tmp_path: Path, public_excerpt: Path) -> None:
    """train retry (as delegate and swarm, through rl.train_gym): with a log open, the greedy
    policy's held-out figures every tenth of the run (here every iteration) under heldout/, the
    last one equal to the report's; one run per family (two families once wrote into one); and
    the same policies as without a log (measuring draws nothing from the training)."""
    import numpy as np

    from orchestrace.learn.experiments import train_retry

    def train() -> object:
        return train_retry(["humaneval", "alfworld"], 0.1, iters=3, batch=16, algo="ppo", data=public_excerpt)

    plain = train()
    with open_log("tensorboard", tmp_path):
        logged = train()
    for name, policy in plain.policies.items():
        pairs = zip(policy.weights, logged.policies[name].weights, strict=True)
        assert all(np.array_equal(w1, w2) and np.array_equal(b1, b2) for (w1, b1), (w2, b2) in pairs), name
    runs = sorted(p.name for p in (tmp_path / "tensorboard").iterdir())
    assert runs == ["RetryStop-alfworld-ppo", "RetryStop-humaneval-ppo"]
    ev = read_events(tmp_path / "tensorboard" / "RetryStop-humaneval-ppo")
    assert [s for s, _ in ev["heldout/reward"]] == [1, 2, 3] and len(ev["heldout/success"]) == 3
    assert ev["heldout/reward"][-1][1] == pytest.approx(
        logged.result.families["humaneval"].learned.reward.mean
    )


@pytest.mark.parametrize("algo", ["reinforce", "ppo", "grpo"])
def test_parallel_swarm_logs_each_leads_reward_and_advantage(tmp_path: Path, algo: str) -> None:
    """train swarm --parallel: one policy shared by three leads; the log shows each lead's mean
    reward and the mean advantage its decisions got. Under the team credit every lead is paid the
    team's R, so each lead's reward is the batch's."""
    from orchestrace.learn.envs.swarm_parallel import parallel_env
    from orchestrace.learn.rl.train_gym import train_policy

    with open_log("tensorboard", tmp_path):
        train_policy(algo, parallel_env(branches=3, task_seed=0), [{"task": i} for i in range(10)],
                     env_name="Swarm", iters=2, batch=4, group=2, epochs=1, minibatches=1)  # fmt: skip
    ev = read_events(tmp_path / "tensorboard" / f"Swarm-{algo}")
    for lead in ("lead_0", "lead_1", "lead_2"):
        assert [s for s, _ in ev[f"train/{lead}_advantage"]] == [1, 2], lead
        assert dict(ev[f"train/{lead}_reward"]) == pytest.approx(dict(ev["train/reward"])), lead
    assert len(ev["train/entropy"]) == 2


def test_mlflow_store_is_created_quietly(tmp_path: Path) -> None:
    """A fresh process (as a command is) creating the store prints nothing: MLflow's import sets
    its logger to INFO, and the store's migrations logged a line each on stderr."""
    import subprocess
    import sys

    code = (
        "import sys; from orchestrace.learn.scalar_log import log_scalars, open_log, prepare_log\n"
        "prepare_log('mlflow', sys.argv[1])\n"
        "with open_log('mlflow', sys.argv[1], run='learned-c=0.01'): log_scalars(1, {'train/reward': 0.5})\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0 and p.stderr == "" and p.stdout == "", p.stderr
    runs = read_mlflow(tmp_path)
    assert list(runs) == ["learned-c=0.01"] and runs["learned-c=0.01"]["train/reward"] == [(1, 0.5)]
