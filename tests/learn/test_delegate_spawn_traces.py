"""The loop through traces for the delegate (O2) and spawn width (O1) decisions: a learned policy
acts in a live run of the route / swarm program, every decision is recomputable from the recorded
trace with the feature function training uses (no train/serve skew), recorded runs train the same
policy as the table / tasks they hold, and bad inputs fail with the file named, exit 1, nothing
written."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path

import gymnasium
import msgspec
import numpy as np
import pytest

from orchestrace.cli import main
from orchestrace.core.errors import BadInput
from orchestrace.core.io import load_one
from orchestrace.core.model import Trace
from orchestrace.learn import load_policy
from orchestrace.learn.datasets import RouteData
from orchestrace.learn.envs.delegate import DelegateEnv
from orchestrace.learn.envs.delegate_traces import delegate_features, route_data_from_traces, route_to_traces
from orchestrace.learn.envs.swarm import FEATURE_NAMES, N_FEATURES, SwarmEnv, SwarmTask, make_task
from orchestrace.learn.envs.swarm_traces import spawn_features, tasks_from_traces
from orchestrace.learn.experiments.delegate import train_delegate
from orchestrace.learn.experiments.protocol import write_trained
from orchestrace.learn.experiments.swarm import train_swarm
from orchestrace.learn.rl.rollouts import NumpyPolicy, PolicyMeta
from orchestrace.learn.stopping.features import features_hash
from orchestrace.runtime.backends.base import ChatRequest, ChatResponse
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.runner import run

MODELS = ["small", "large"]


def _toy_table(n: int = 24) -> RouteData:
    """Queries of two groups: the small model answers history right and math wrong, the large
    one answers both; the large one costs ten times as much."""
    groups = ["math" if i % 2 else "history" for i in range(n)]
    texts = [f"compute {i} + {2 * i} please" if g == "math" else f"who ruled the kingdom in year {1000 + i}?"
             for i, g in enumerate(groups)]  # fmt: skip
    quality = np.array([[0.0 if g == "math" else 1.0, 1.0] for g in groups])
    cost = np.array([[0.001, 0.01]] * n)
    return RouteData("toy", [f"q{i}" for i in range(n)], texts, groups, list(MODELS), quality, cost)


@pytest.fixture(scope="module")
def delegate_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("del")
    write_trained(out, train_delegate(table=_toy_table(), lam=0.5, iters=30, batch=64, seed=0))
    return str(out / "delegate-toy")


def _decisions(tr: Trace, name: str) -> list[tuple[int, dict]]:
    return [
        (i, e.attrs or {})
        for i, e in enumerate(tr.events)
        if e.type == "orchestrator_decision" and (e.attrs or {}).get("decision") == name
    ]


def _prefix(tr: Trace, i: int) -> Trace:
    """The trace as it stood before event i (what the live policy was shown)."""
    return msgspec.structs.replace(tr, events=tr.events[:i], edges=[])


def test_delegate_live_decisions_recompute_from_the_trace(delegate_path: str, tmp_path: Path) -> None:
    table = _toy_table()
    env = DelegateEnv(table, lam=0.5)  # what training and offline evaluation show the policy
    pol = load_policy(delegate_path)
    chosen = []
    for q in range(6):
        out = str(tmp_path / f"r{q}.events.jsonl")
        cfg = {
            "question": table.texts[q],
            "group": table.groups[q],
            "models": MODELS,
            "question_id": table.ids[q],
        }
        run(
            "route",
            out,
            config=cfg,
            backend=ScriptedBackend(choices=["A", "B"], seed=q),
            trace_policies={"delegate": pol},
        )
        tr = load_one(out)
        [(i, d)] = _decisions(tr, "should_delegate")
        x = delegate_features(_prefix(tr, i))
        assert features_hash(x) == d["features_hash"]  # recomputed from the trace == what the run saw
        assert features_hash(env.feats[q]) == d["features_hash"]  # == what training sees
        p = pol.policy.probs(x[None])[0]
        a = int(p.argmax())
        assert d["value"] == f"model:{MODELS[a]}" and d["prob"] == pytest.approx(float(p[a]), abs=1e-6)
        assert d["policy"] == "delegate-toy" and (tr.metadata or {})["runtime"]["policies"] == {
            "delegate": "delegate-toy"
        }
        answered = [e.agent for e in tr.events if e.type == "return"]
        assert answered == [d["value"]]  # the question went where the policy said
        chosen.append(MODELS[a])
    # trained at lambda 0.5, the router sends history to the cheap model and math to the large one
    assert chosen == ["small", "large"] * 3


def _biased_spawn_policy(path: Path) -> str:
    """k = 0 (the orchestrator does it) for a one-subtask stage, else k = 2."""
    w = np.zeros((9, N_FEATURES), np.float32)
    w[0, FEATURE_NAMES.index("width_is_1")] = 10.0
    b = np.zeros(9, np.float32)
    b[2] = 1.0
    cfg = dataclasses.asdict(SwarmEnv().cfg)
    NumpyPolicy(PolicyMeta("Swarm", N_FEATURES, 9, [], extra={"config": cfg}), [(w, b)]).save(path)
    return str(path)


@pytest.fixture(scope="module")
def spawn_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("sw")
    write_trained(out, train_swarm(iters=5, batch=16, train_tasks=40, eval_tasks=4, seed=0))
    return str(out / "swarm")


@pytest.mark.parametrize("which", ["trained", "biased"])
def test_spawn_live_decisions_recompute_from_the_trace(spawn_path: str, tmp_path: Path, which: str) -> None:
    path = spawn_path if which == "trained" else _biased_spawn_policy(tmp_path / "biased")
    pol = load_policy(path)
    widths = []
    tasks = [
        make_task(7, 0, pol.cfg),
        make_task(7, 1, pol.cfg),
        SwarmTask("fixed", [[3, 4, 2], [5], [2, 2, 6], [4]]),
    ]
    for t, task in enumerate(tasks):
        out = str(tmp_path / f"s{t}.events.jsonl")
        run("swarm", out, config={"stages": task.stages, "task_id": task.id}, backend={"kind": "scripted", "seed": t},
            trace_policies={"spawn": pol})  # fmt: skip
        tr = load_one(out)
        decs = _decisions(tr, "should_spawn")
        assert len(decs) == len(task.stages)  # one per stage, the program ran every stage
        env = SwarmEnv(pol.cfg, tasks=[task])
        obs, _ = env.reset(options={"task": 0})
        for s, (i, d) in enumerate(decs):
            x = spawn_features(_prefix(tr, i), pol.cfg)
            assert x is not None and features_hash(x) == d["features_hash"]
            p = pol.policy.probs(x[None])[0]
            assert d["value"] == int(p.argmax()) and d["prob"] == pytest.approx(float(p.max()), abs=1e-6)
            agents = _decisions(tr, "delegate")[s][1]["value"]
            assert agents == (["main"] if d["value"] == 0 else [f"s{s}.w{j}" for j in range(d["value"])])
            # the env's own observation on the same stages and widths (until it ends the episode)
            if obs is not None:
                assert features_hash(obs) == d["features_hash"]
                obs, _, done, _, _ = env.step(d["value"])
                obs = None if done else obs
            widths.append(d["value"])
    if which == "biased":
        assert 0 in widths and 2 in widths  # both paths ran: the orchestrator's own stage and spawned workers


def test_explored_spawn_widths_are_drawn_and_recomputable(tmp_path: Path) -> None:
    """With --explore a uniform spawn policy draws each stage's width (seeded by run and stage):
    every decision says so with the draw's chance 1/9, the same run draws the same widths, and the
    features still recompute from the trace prefix."""
    p = tmp_path / "uniform"
    cfg = dataclasses.asdict(SwarmEnv().cfg)
    NumpyPolicy(PolicyMeta("Swarm", N_FEATURES, 9, [], extra={"config": cfg}),
                [(np.zeros((9, N_FEATURES)), np.zeros(9))]).save(p)  # fmt: skip
    stages = [[3, 4, 2], [5], [2, 2, 6], [4, 4], [3], [2, 5, 2]]
    widths = []
    for name in ("a", "b"):
        out = str(tmp_path / f"{name}.events.jsonl")
        run("swarm", out, config={"stages": stages}, backend={"kind": "scripted", "seed": 0},
            trace_policies={"spawn": load_policy(str(p), explore=True)})  # fmt: skip
        tr = load_one(out)
        decs = _decisions(tr, "should_spawn")
        for i, d in decs:
            assert d["sampled"] is True and d["prob"] == pytest.approx(1 / 9, abs=1e-6)
            assert features_hash(spawn_features(_prefix(tr, i), SwarmEnv().cfg)) == d["features_hash"]
        widths.append([d["value"] for _, d in decs])
    assert widths[0] == widths[1]  # same trace id (program and seed): the same draws
    assert len(set(widths[0])) > 1  # drawn, not the argmax of a uniform policy (always 0)


# ------------------------------------------------------------------ training from traces


def test_route_table_to_traces_and_back_trains_the_same_router(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    table = _toy_table()
    route_to_traces(table, str(tmp_path / "tr"))
    back = route_data_from_traces(str(tmp_path / "tr" / "*.events.jsonl"))
    assert (back.name, back.ids, back.texts, back.groups, back.models) == (
        table.name, table.ids, table.texts, table.groups, table.models)  # fmt: skip
    assert np.array_equal(back.quality, table.quality) and np.array_equal(back.cost, table.cost)
    write_trained(tmp_path / "a", train_delegate(table=table, lam=0.5, iters=5, seed=0))
    code, text = _cli(capsys, ["train", "delegate", "--traces", str(tmp_path / "tr" / "*.events.jsonl"), "--lambda",
                               "0.5", "--iters", "5", "-o", str(tmp_path / "b"), "--format", "json"])  # fmt: skip
    assert code == 0, text
    pa, pb = (
        NumpyPolicy.load(tmp_path / "a" / "delegate-toy"),
        NumpyPolicy.load(tmp_path / "b" / "delegate-toy"),
    )
    for (wa, ba), (wb, bb) in zip(pa.weights, pb.weights, strict=True):
        assert np.array_equal(wa, wb) and np.array_equal(ba, bb)


def test_live_route_runs_are_training_data(tmp_path: Path) -> None:
    """One recorded run per query and model (the program's default model set per run); the
    quality is the answer checked against the config's gold."""
    table = _toy_table(4)
    for q in range(4):
        for m in MODELS:
            cfg = {"question": table.texts[q], "group": table.groups[q], "question_id": table.ids[q], "gold": "A",
                   "default": m}  # fmt: skip
            run("route", str(tmp_path / f"{q}-{m}.events.jsonl"), config=cfg,
                backend=ScriptedBackend(choices=["A", "B"], seed=q))  # fmt: skip
    data = route_data_from_traces(str(tmp_path / "*.events.jsonl"))
    assert data.models == MODELS and sorted(data.ids) == table.ids
    for q, qid in enumerate(data.ids):
        for j, m in enumerate(MODELS):
            ret = next(
                e
                for e in load_one(str(tmp_path / f"{qid[1:]}-{m}.events.jsonl")).events
                if e.type == "return"
            )
            assert data.quality[q, j] == float(ret.content == "A")
    assert 0 < data.quality.mean() < 1  # both outcomes occur, so the check above can fail


def test_swarm_runs_train_the_same_policy_as_their_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    tasks = [make_task(0, i, SwarmEnv().cfg) for i in range(6)]
    for i, task in enumerate(tasks):
        run("swarm", str(tmp_path / "tr" / f"t{i}.events.jsonl"), config={"stages": task.stages, "task_id": task.id},
            backend={"kind": "scripted", "seed": 0})  # fmt: skip
    back = tasks_from_traces(str(tmp_path / "tr" / "*.events.jsonl"))
    assert [(t.id, t.stages) for t in back] == [(t.id, t.stages) for t in tasks]
    # the env takes the runs as a file argument too, as the other envs take theirs
    # (a str was an AttributeError at reset)
    env = gymnasium.make("orchestrace/Swarm-v0", tasks=str(tmp_path / "tr" / "*.events.jsonl"))
    assert [(t.id, t.stages) for t in env.unwrapped.tasks] == [(t.id, t.stages) for t in tasks]
    with pytest.raises(BadInput, match=r"non-empty list of SwarmTask \(recorded swarm runs: .*\), got dict"):
        SwarmEnv(tasks={"stages": [[1]]})
    write_trained(
        tmp_path / "a", train_swarm(iters=4, eval_tasks=2, seed=0, tasks=tasks)
    )  # the CLI's defaults
    code, text = _cli(capsys, ["train", "swarm", "--traces", str(tmp_path / "tr" / "*.events.jsonl"), "--iters", "4",
                               "--eval-tasks", "2", "-o", str(tmp_path / "b"), "--format", "json"])  # fmt: skip
    assert code == 0, text
    pa, pb = NumpyPolicy.load(tmp_path / "a" / "swarm"), NumpyPolicy.load(tmp_path / "b" / "swarm")
    assert pa.weights[0][0].shape == pb.weights[0][0].shape
    for (wa, ba), (wb, bb) in zip(pa.weights, pb.weights, strict=True):
        assert np.array_equal(wa, wb) and np.array_equal(ba, bb)


class _PricedModels:
    """Two callable 'models': large always answers right, small only on history questions; each
    call is billed at its model's price (the runtime records it as the return's cost_usd)."""

    name = "priced"
    price = {"small": 0.001, "large": 0.01}

    async def chat(self, req: ChatRequest) -> ChatResponse:
        right = req.model == "large" or "ruled the kingdom" in req.messages[-1]["content"]
        return ChatResponse(text="A" if right else "B", model=req.model, cost_usd=self.price[req.model])


def test_on_policy_route_runs_train_a_router(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Runs a router took live (one model per query, drawn with --explore from a uniform router)
    are logged bandit samples: the recorded probability weighs each, and the update routes history
    to the cheap model and math to the large one (lambda 0.5: the large model's price is worth
    half a right answer)."""
    from orchestrace.learn.envs.delegate import HASH_DIM, N_STATS
    from orchestrace.learn.envs.delegate_traces import logged_routes

    d = HASH_DIM + N_STATS
    start = tmp_path / "uniform"
    NumpyPolicy(PolicyMeta("Delegate", d, 2, [], extra={"models": MODELS, "mode": "route"}),
                [(np.zeros((2, d)), np.zeros(2))]).save(start)  # fmt: skip
    pol = load_policy(str(start), explore=True)
    table = _toy_table(12)
    for q in range(len(table.ids)):
        cfg = {"question": table.texts[q], "group": table.groups[q], "question_id": table.ids[q], "gold": "A"}
        for seed in range(2):
            run("route", str(tmp_path / "runs" / f"{q}-{seed}.events.jsonl"), config=cfg, seed=seed,
                backend=_PricedModels(), trace_policies={"delegate": pol})  # fmt: skip
    run("route", str(tmp_path / "runs" / "default.events.jsonl"), config={**cfg, "default": "large"},
        backend=_PricedModels())  # fmt: skip
    models, runs = logged_routes(str(tmp_path / "runs" / "*.events.jsonl"))
    assert models == MODELS and len(runs) == 2 * len(table.ids) + 1
    assert sorted({r.prob for r in runs}) == [0.5, 1.0]  # drawn from a uniform router; the default run: 1
    assert {r.action for r in runs} == {0, 1}  # both models were tried
    code, text = _cli(capsys, ["train", "delegate", "--traces", str(tmp_path / "runs" / "*.events.jsonl"), "--logged",
                               "--start", str(start), "--lambda", "0.5", "-o", str(tmp_path / "out"),
                               "--log", "tensorboard"])  # fmt: skip
    assert code == 0, text
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path / "out" / "tensorboard"))  # --log: the one update, at step 1
    acc.Reload()
    ev = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    result = json.loads((tmp_path / "out" / "delegate-logged-result.json").read_text())
    assert ev["train/reward"] == [(1, pytest.approx(result["logged_reward"]))]
    assert {"train/approx_kl", "train/clip_fraction", "train/entropy", "time/seconds_per_iteration"} <= set(
        ev
    )
    new = NumpyPolicy.load(tmp_path / "out" / "delegate-logged")
    routed = new.probs(DelegateEnv(table).feats).argmax(axis=1)
    assert [MODELS[a] for a in routed] == ["small" if g == "history" else "large" for g in table.groups]


# ------------------------------------------------------------------ bad input


def _cli(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str]:
    """The real entry point: an error is one line on stderr and the exit code."""
    with pytest.raises(SystemExit) as e:
        main(args)
    cap = capsys.readouterr()
    return int(e.value.code or 0), " ".join((cap.out + cap.err).split())


def _run_route(capsys: pytest.CaptureFixture[str], out: Path, *extra: str) -> tuple[int, str]:
    return _cli(
        capsys, ["run", "route", "--backend", "scripted", "--set", 'question="q?"', *extra, "-o", str(out)]
    )


def test_delegate_policy_for_other_models(
    delegate_path: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run.events.jsonl"
    code, text = _run_route(capsys, out, "--set", 'models=["a","b"]', "--policy", f"delegate={delegate_path}")
    assert code == 1 and "routes among ['small', 'large'], the run offers ['a', 'b']" in text
    assert "delegate-toy.safetensors" in text and not out.exists()


def test_policy_file_for_another_feature_set(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    p = tmp_path / "old-swarm"
    NumpyPolicy(PolicyMeta("Swarm", 18, 9, []), [(np.zeros((9, 18)), np.zeros(9))]).save(p)
    out = tmp_path / "run.events.jsonl"
    code, text = _cli(capsys, ["run", "swarm", "--backend", "scripted", "--set", "stages=[[2,3]]",
                               "--policy", f"spawn={p}", "-o", str(out)])  # fmt: skip
    assert code == 1 and "sees 18 features" in text and "old-swarm.safetensors" in text and not out.exists()


def test_policy_for_another_decision_and_a_decision_the_program_lacks(
    delegate_path: str, spawn_path: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "run.events.jsonl"
    code, text = _run_route(capsys, out, "--policy", f"delegate={spawn_path}")
    assert code == 1 and "answers 'spawn', not 'delegate'" in text and "swarm.safetensors" in text
    code, text = _run_route(capsys, out, "--policy", f"spawn={spawn_path}")
    assert (
        code == 1
        and "the program 'route' has no learned spawn decision (its learnable decisions: delegate)" in text
    )
    code, text = _cli(capsys, ["run", "vote", "--backend", "scripted", "--set", 'question="q?"',
                               "--policy", f"delegate={delegate_path}", "-o", str(out)])  # fmt: skip
    assert code == 1 and "the program 'vote' has no learned delegate decision" in text
    code, text = _run_route(capsys, out, "--policy", f"foo={delegate_path}")
    assert code == 1 and "a program's learned decisions are stop, delegate, spawn, aggregate" in text
    assert not out.exists()


def test_corrupt_delegate_policy(delegate_path: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(Path(delegate_path + ".safetensors").read_bytes()[:60])
    out = tmp_path / "run.events.jsonl"
    code, text = _run_route(capsys, out, "--policy", f"delegate={bad}")
    assert code == 1 and "not a safetensors file" in text and "bad.safetensors" in text and not out.exists()


def test_traces_a_trainer_cannot_learn_from(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    vote = tmp_path / "v.events.jsonl"
    run("vote", str(vote), config={"question": "q?", "budget": 2}, backend={"kind": "scripted", "seed": 0})
    for cmd in (["delegate", "--iters", "2"], ["swarm", "--iters", "2", "--eval-tasks", "2"]):
        code, text = _cli(capsys, ["train", *cmd, "--traces", str(vote), "-o", str(tmp_path / cmd[0])])
        assert (
            code == 1 and f"not a run of the {'route' if cmd[0] == 'delegate' else 'swarm'} program" in text
        )
        assert "v.events.jsonl" in text and not os.path.exists(tmp_path / cmd[0])
    # a query recorded with one model only: the Delegate env needs every model's outcome
    route_to_traces(_toy_table(2), str(tmp_path / "tr"))
    os.remove(tmp_path / "tr" / "q1.1.events.jsonl")
    code, text = _cli(capsys, ["train", "delegate", "--traces", str(tmp_path / "tr" / "*.events.jsonl"),
                               "--iters", "2", "-o", str(tmp_path / "d")])  # fmt: skip
    assert code == 1 and "query 'q1' has no run with large" in text and "q1.0.events.jsonl" in text
    assert not os.path.exists(tmp_path / "d")
    # a live run without a gold: the answer has no outcome
    run(
        "route",
        str(tmp_path / "ng" / "x.events.jsonl"),
        config={"question": "q?"},
        backend={"kind": "scripted", "seed": 0},
    )
    code, text = _cli(capsys, ["train", "delegate", "--traces", str(tmp_path / "ng" / "*.events.jsonl"),
                               "--iters", "2", "-o", str(tmp_path / "d")])  # fmt: skip
    assert code == 1 and "no attrs.quality on it and no gold" in text and "x.events.jsonl" in text


def test_train_commands_name_every_file_they_write(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """train delegate|swarm print a 'wrote PATH' line for each file left in -o (the policy, its
    JSON twin, the result JSON), compared with what is on disk."""
    route_to_traces(_toy_table(), str(tmp_path / "route"))
    task = make_task(0, 0, SwarmEnv().cfg)
    run("swarm", str(tmp_path / "swarm" / "t0.events.jsonl"), config={"stages": task.stages, "task_id": task.id},
        backend={"kind": "scripted", "seed": 0})  # fmt: skip
    for cmd in (
        ["delegate", "--lambda", "0.5", "--iters", "2"],
        ["swarm", "--iters", "2", "--eval-tasks", "2"],
    ):
        out = tmp_path / "out" / cmd[0]
        runs = str(tmp_path / ("route" if cmd[0] == "delegate" else "swarm") / "*.events.jsonl")
        code, text = _cli(capsys, ["train", *cmd, "--traces", runs, "-o", str(out)])
        assert code == 0, text
        on_disk = sorted(str(p) for p in out.rglob("*") if p.is_file())
        assert len(on_disk) == 3 and all(f"wrote {p}" in text for p in on_disk), (on_disk, text)


def _edit(path: Path, edit) -> None:
    """Rewrite an event log with ``edit(records)`` applied (its closing update record carries the
    metadata that wins)."""
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    edit(recs)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _route_cfg(recs: list) -> dict:
    return recs[-1]["metadata"]["runtime"]["config"]


@pytest.mark.parametrize(
    ("edit", "pointer", "said"),
    [
        # float("abc") and a string metadata.runtime were internal errors (exit 3)
        (lambda r: next(x for x in r if x.get("type") == "return")["attrs"].update(quality="abc"),
         "/events/3/attrs/quality", "attrs.quality must be a finite number, got 'abc'"),
        (lambda r: r[-1]["metadata"].update(runtime="route"), "/metadata/runtime/program", "not a run of the route program"),
        # a string of models was read as its letters, one model each
        (lambda r: _route_cfg(r).update(models="small"), "/metadata/runtime/config/models", "a non-empty list of names"),
        (lambda r: _route_cfg(r).update(group=["x"]), "/metadata/runtime/config/group", "group must be a string"),
    ],
)  # fmt: skip
def test_a_route_run_with_values_of_the_wrong_type_is_bad_input(tmp_path: Path, edit, pointer, said) -> None:
    from orchestrace.core.errors import OrchestraceError

    route_to_traces(_toy_table(2), str(tmp_path / "tr"))
    bad = tmp_path / "tr" / "q0.0.events.jsonl"
    _edit(bad, edit)
    with pytest.raises(OrchestraceError, match=re.escape(said)) as e:
        route_data_from_traces(str(tmp_path / "tr" / "*.events.jsonl"))
    assert e.value.code == "OT614" and (e.value.path, e.value.pointer) == (str(bad), pointer)


@pytest.mark.parametrize("stage", [5, ["abc"], ["3"], [2.7], [], [0]])
def test_a_swarm_run_whose_stage_is_no_list_of_sizes_is_bad_input(tmp_path: Path, stage) -> None:
    """int() of 5 or "abc" was an internal error; "3" and 2.7 were read as 3 and 2 silently."""
    from orchestrace.core.errors import OrchestraceError

    p = tmp_path / "t.events.jsonl"
    run("swarm", str(p), config={"stages": [[1, 2], [3]]}, backend={"kind": "scripted", "seed": 0})
    _edit(p, lambda r: r[-1]["metadata"]["runtime"]["config"].update(stages=[[1, 2], stage]))
    with pytest.raises(OrchestraceError, match="a stage is a non-empty list of positive integers") as e:
        tasks_from_traces(str(p))
    assert e.value.code == "OT614" and e.value.pointer == "/metadata/runtime/config/stages/1"
