"""Gateway programs (``train team --program module:function``) without the model: rollouts run the
user's function against a scripted backend; every way a run can fail is an error trace left out of
the update; a missing function is a clear error before anything is written."""

from __future__ import annotations

from pathlib import Path

import gateway_teams
import pytest

from orchestrace.cli import main
from orchestrace.core.io import load_one
from orchestrace.learn.gateway.completers import BackendCompleter
from orchestrace.learn.gateway.service import CallDefaults, Team
from orchestrace.learn.gateway.train import GatewayRollouts, ProgramStep, load_team_function
from orchestrace.learn.team.config import TeamConfig, reward_spec, split
from orchestrace.learn.team.program import BadInput
from orchestrace.runtime.backends.scripted import ScriptedBackend

TEAM = Team("agent", {"solver": "solver", "checker": "checker"})


def runner(fn, timeout: float = 30.0) -> GatewayRollouts:
    backend = ScriptedBackend(rules={"teammate answered": "France", "Answer with": "france"})
    return GatewayRollouts(
        BackendCompleter(backend, None, batch_window=0),
        TEAM,
        fn,
        defaults=CallDefaults(max_tokens=8),
        timeout=timeout,
    )


@pytest.fixture
def failing():
    gateway_teams.FAIL.update({"r2": "raise", "r3": "hang", "r4": "silent"})
    gateway_teams.RELEASE.clear()
    yield
    gateway_teams.FAIL.clear()
    gateway_teams.RELEASE.set()


def test_failed_runs_are_error_traces_left_out_of_the_update(tmp_path: Path, failing):
    cfg = TeamConfig(program="gateway_teams:chain", group=4, questions=1, train_pool=2, heldout=1)
    remote = runner(gateway_teams.chain, timeout=3.0)
    step = ProgramStep(cfg, None, None, None, reward_spec(cfg), remote=remote)  # type: ignore[arg-type]
    step.train_ids, step.heldout_ids = split(cfg)
    try:
        kept = step.collect(1, None, tmp_path / "iter-001")
    finally:
        remote.close()
    traces = sorted((tmp_path / "iter-001" / "traces").glob("*.events.jsonl"))
    assert len(traces) == 4 and len(kept) == 1 and step.failed == 3
    outcomes = {p.name: load_one(p).metadata["outcome"] for p in traces}
    errors = sorted(o.get("error", "") for o in outcomes.values() if o["status"] == "error")
    assert [e.split(" ")[2] for e in errors] == ["did", "made", "raised"]
    assert "RuntimeError: the team's code failed" in errors[2]
    ok = load_one(kept[0])
    assert ok.metadata["outcome"] == {"status": "ok", "stop_reason": "done", "final": "France", "calls": 2}
    assert ok.metadata["runtime"]["config"]["question"] in step.train_ids
    solver, checker = (e for e in ok.events if e.type == "return")
    assert (solver.agent, checker.agent) == ("solver", "checker")
    # the checker's prompt quotes the solver's answer: the data flow is an edge between them
    assert any(x.src == solver.id and x.dst == checker.id and x.type == "message" for x in ok.edges)
    # the run that raised after its first call keeps that call, and says why it ended
    raised = next(load_one(p) for p in traces if "raised" in outcomes[p.name].get("error", ""))
    assert [e.agent for e in raised.events if e.type == "return"] == ["solver"]
    assert next(e for e in raised.events if e.type == "orchestrator_decision").status == "error"


def test_an_async_program_runs_its_runs_in_one_event_loop(tmp_path: Path):
    cfg = TeamConfig(program="gateway_teams:achain", group=2, questions=1, train_pool=2, heldout=1)
    remote = runner(gateway_teams.achain)
    step = ProgramStep(cfg, None, None, None, reward_spec(cfg), remote=remote)  # type: ignore[arg-type]
    step.train_ids, step.heldout_ids = split(cfg)
    try:
        kept = step.collect(1, None, tmp_path / "iter-001")
    finally:
        remote.close()
    assert len(kept) == 2 and step.failed == 0
    for p in kept:
        tr = load_one(p)
        assert tr.metadata["outcome"]["final"] == "France"  # the last completion, as none was returned
        assert tr.task_id.startswith("In which country")  # GRPO groups runs by their question


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("no_such_module_x:run", "cannot import"),
        ("gateway_teams:missing", "has no function 'missing'"),
        ("gateway_teams", "expected module:function"),
        ("examples/teams/none.py:run", "cannot import"),
    ],
)
def test_a_program_that_does_not_exist_is_a_clear_error(spec, says):
    with pytest.raises(BadInput, match=says) as e:
        load_team_function(spec)
    assert e.value.code == "OT742"


def test_train_team_with_a_missing_function_exits_1_and_writes_nothing(tmp_path: Path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        main(["train", "team", "--program", "gateway_teams:missing", "-o", str(out), "-k", "1"])
    assert e.value.code == 1
    assert "OT742" in capsys.readouterr().err
    assert not out.exists()


def test_agents_are_for_a_gateway_program_only(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "team", "--agents", "a,b", "-o", str(tmp_path / "run"), "-k", "1"])
    assert e.value.code == 1 and "OT743" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_resamples_are_for_the_team_program_only(tmp_path: Path, capsys):
    out = tmp_path / "run"
    args = ["train", "team", "--program", "gateway_teams:chain", "--credit", "loo-fork"]
    with pytest.raises(SystemExit) as e:
        main([*args, "--resamples", "3", "-o", str(out), "-k", "1"])
    assert e.value.code == 1 and "--resamples is for the team program" in capsys.readouterr().err
    assert not out.exists()


def test_the_runs_of_a_group_sample_apart_even_when_the_program_fixes_the_seed(tmp_path: Path):
    import orjson

    from orchestrace.runtime.cache import cache_path

    cfg = TeamConfig(program="gateway_teams:seeded", group=2, questions=1, train_pool=2, heldout=1)
    remote = runner(gateway_teams.seeded)
    step = ProgramStep(cfg, None, None, None, reward_spec(cfg), remote=remote)  # type: ignore[arg-type]
    step.train_ids, step.heldout_ids = split(cfg)
    try:
        kept = step.collect(1, None, tmp_path / "iter-001")
    finally:
        remote.close()
    seeds = [orjson.loads(Path(cache_path(p)).read_bytes().splitlines()[0])["request"]["seed"] for p in kept]
    assert len(seeds) == 2 and seeds[0] != seeds[1] and 1 not in seeds


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("def run(:\n", "SyntaxError while importing it"),
        ("raise RuntimeError('boom')\n", "RuntimeError while importing it: boom"),
        ("import sys\nsys.exit(3)\n", "SystemExit while importing it: 3"),  # exit 3 and no word
    ],
)
def test_user_code_that_fails_while_imported_is_named_not_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str, says: str
):
    """A --program file, a run program module or a reward hook module that fails at import was an
    internal error (exit 3, 'a bug in orchestrace')."""
    from orchestrace.core.errors import OrchestraceError
    from orchestrace.core.plugins import resolve
    from orchestrace.runtime.runner import load_program

    (tmp_path / "usermod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BadInput, match=says) as e:
        load_team_function(f"{tmp_path / 'usermod.py'}:run")
    assert e.value.code == "OT742"
    for load, code in (
        (lambda: resolve("usermod:f"), "OT401"),
        (lambda: load_program("usermod:build"), "OT604"),
    ):
        with pytest.raises(OrchestraceError, match=says) as e:
            load()
        assert e.value.code == code
