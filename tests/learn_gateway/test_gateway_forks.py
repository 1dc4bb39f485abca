"""Credit by forks for a gateway program (``--credit loo-fork`` / ``shapley-fork``): the user's
program is re-run through the gateway in replay mode (learn/gateway/replay.py), with a scripted
backend whose answers depend on the sample seed (fast, no model). Checked by hand against the
recorded traces and call caches: the replayed calls get the recorded completions verbatim, the
forked call is sampled with another seed, the credit is R - R(fork) read from the outcomes, a
program that asks something new on every run diverges and is marked, and no fork enters the batch."""

from __future__ import annotations

import random
from pathlib import Path

import gateway_teams
import msgspec
import orjson
import pytest

from orchestrace.core.io import load_one
from orchestrace.learn.gateway.completers import BackendCompleter
from orchestrace.learn.gateway.service import CallDefaults, Team
from orchestrace.learn.gateway.train import GatewayRollouts, ProgramStep
from orchestrace.learn.team.batch import read_batch
from orchestrace.learn.team.config import TeamConfig, reward_spec, split
from orchestrace.runtime.backends.base import ChatRequest, TokenSample
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.cache import cache_path

TEAM = Team("agent", {"solver": "solver", "checker": "checker"})
COUNTRIES = ["France", "Spain"]


def scripted_team(req: ChatRequest) -> str:
    """The solver says France or Spain by its seed; the checker keeps the teammate's answer or
    says one of the two, by its seed."""
    rng = random.Random(f"{req.seed}|{req.model}")
    if req.model == "solver":
        return rng.choice(COUNTRIES)
    said = req.messages[-1]["content"].split("A teammate answered: ")[1].split("\n")[0]
    return said if rng.random() < 0.5 else rng.choice(COUNTRIES)


class TokenScripted(ScriptedBackend):
    """The scripted team with a token record per call (made-up ids), so runs make a batch."""

    async def chat(self, req: ChatRequest):  # type: ignore[override]
        out = await super().chat(req)
        ids = [sum(map(ord, w)) % 997 for w in out.text.split()] or [0]
        sample = TokenSample(
            prompt_ids=[1, 2, 3],
            completion_ids=ids,
            logprobs=[-0.5] * len(ids),
            adapter=req.model,
            temperature=0.7,
        )
        return msgspec.structs.replace(out, tokens=sample)


def collect(tmp_path: Path, fn, credit: str = "loo-fork", group: int = 4) -> tuple[ProgramStep, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    spec = tmp_path / "france.toml"
    spec.write_text(
        '[[terms]]\nchannel = "team"\n[hooks]\nverifier = "gateway_teams:reward_france"\n', encoding="utf-8"
    )
    cfg = TeamConfig(
        program="gateway_teams:chain",
        credit=credit,
        group=group,
        questions=2,
        train_pool=4,
        heldout=1,
        reward=str(spec),
    )
    remote = GatewayRollouts(
        BackendCompleter(TokenScripted(fn=scripted_team), None, batch_window=0),
        TEAM,
        fn,
        defaults=CallDefaults(max_tokens=8),
        timeout=30.0,
    )
    step = ProgramStep(cfg, None, None, None, reward_spec(cfg), remote=remote)  # type: ignore[arg-type]
    step.forker = remote
    step.train_ids, step.heldout_ids = split(cfg)
    try:
        kept = step.collect(1, None, tmp_path / "iter-001")
    finally:
        remote.close()
    return step, kept


def calls(path: str) -> dict[str, dict]:
    """The call cache of a trace by the agent whose return event names the entry."""
    cache = {
        f"{r['key']}#{r['n']}": r for r in map(orjson.loads, Path(cache_path(path)).read_bytes().splitlines())
    }
    tr = load_one(path)
    return {e.agent: cache[e.attrs["call"]] for e in tr.events if e.type == "return" and e.status != "error"}


def fork_of(path: str, label: str) -> str:
    p = Path(path)
    return str(p.parent.parent / "forks" / p.name.replace(".events.jsonl", f".resample-{label}.events.jsonl"))


def final(path: str) -> float:
    return float(load_one(path).metadata["outcome"]["final"] == "France")


def test_a_fork_replays_the_calls_before_the_fork_and_resamples_the_forked_one(tmp_path: Path):
    step, kept = collect(tmp_path, gateway_teams.chain)
    assert len(kept) == 8 and step.fork_figures == {
        "forks": 16.0,
        "forks_failed": 0.0,
        "forks_diverged": 0.0,
        "forks_replayed_calls": 8.0,  # the solver's call in each checker fork
    }
    solver_texts_differ = 0
    for p in kept:
        tr, rec = load_one(p), calls(p)
        # the checker's fork: the solver's call answered from the recording, verbatim (text and
        # tokens), the checker's call sampled with another seed
        fp = fork_of(p, "checker")
        fork, fc = load_one(fp), calls(fp)
        assert fc["solver"]["outcome"] == rec["solver"]["outcome"]
        assert fc["solver"]["request"] == rec["solver"]["request"]
        assert fc["checker"]["request"]["seed"] != rec["checker"]["request"]["seed"]
        assert [e.attrs.get("replayed") for e in fork.events if e.type == "return"] == [True, None]
        at = next(e for e in tr.events if e.type == "return" and e.agent == "checker")
        (iv,) = [e for e in fork.events if e.type == "human_intervention"]
        assert iv.attrs == {"intervention": "resample", "at": at.id}
        f = fork.metadata["fork"]
        assert (f["parent"], f["at"], f["do"], f["agents"]) == (tr.trace_id, at.id, "resample", ["checker"])
        assert (f["replayed"], f["diverged"], f["reached"]) == (1, [], ["checker"])
        assert fork.trace_id == f"{tr.trace_id}~resample~checker"
        assert fork.metadata["runtime"] == tr.metadata["runtime"]
        # the solver's fork: nothing before it to replay; its call and every later one sampled anew
        fs = calls(fork_of(p, "solver"))
        assert fs["solver"]["request"]["seed"] != rec["solver"]["request"]["seed"]
        assert fs["solver"]["request"]["messages"] == rec["solver"]["request"]["messages"]
        assert fs["checker"]["request"]["seed"] != rec["checker"]["request"]["seed"]
        assert load_one(fork_of(p, "solver")).metadata["fork"]["replayed"] == 0
        solver_texts_differ += fs["solver"]["outcome"]["ok"]["text"] != rec["solver"]["outcome"]["ok"]["text"]
    assert solver_texts_differ > 0


def test_loo_fork_credit_is_the_reward_minus_the_forks_and_no_fork_enters_the_batch(tmp_path: Path):
    step, kept = collect(tmp_path, gateway_teams.chain)
    assert all("/forks/" not in p for p in kept)
    batch = read_batch(kept, step.spec, "loo-fork", "agent")
    # no fork in the batch: its traces are the recorded runs, its rows their two calls each
    assert [t.trace_id for t in batch.traces] == [load_one(p).trace_id for p in kept]
    assert len(batch.rows) == 2 * len(kept)
    assert all("~" not in batch.traces[r.trace].trace_id for r in batch.rows)
    want, got = {}, {}
    for i, p in enumerate(kept):
        r = final(p)
        for agent in ("solver", "checker"):
            want[(i, agent)] = r - final(fork_of(p, agent))
    for row in batch.rows:
        got[(row.trace, row.agent)] = row.advantage
    assert got == pytest.approx(want)
    assert any(v != 0 for v in want.values())  # the check can fail


def test_shapley_fork_uses_every_set_of_agents_resampled(tmp_path: Path):
    step, kept = collect(tmp_path, gateway_teams.chain, credit="shapley-fork", group=2)
    assert step.fork_figures["forks"] == 3 * len(kept)
    batch = read_batch(kept, step.spec, "shapley-fork", "agent")
    for row in batch.rows:
        p = kept[row.trace]
        r, rs, rc, both = (
            final(p),
            final(fork_of(p, "solver")),
            final(fork_of(p, "checker")),
            final(fork_of(p, "solver+checker")),
        )
        # v(S): R of the fork resampling everyone outside S; two players, each order equally likely
        v = {(): both, ("solver",): rc, ("checker",): rs, ("solver", "checker"): r}
        if row.agent == "solver":
            want = 0.5 * (v[("solver",)] - v[()]) + 0.5 * (v[("solver", "checker")] - v[("checker",)])
        else:
            want = 0.5 * (v[("checker",)] - v[()]) + 0.5 * (v[("solver", "checker")] - v[("solver",)])
        assert row.advantage == pytest.approx(want)


def test_a_program_that_asks_something_new_each_run_diverges_and_samples_fresh(tmp_path: Path):
    step, kept = collect(tmp_path, gateway_teams.drifting, group=2)
    assert step.fork_figures["forks_diverged"] == len(kept)  # every checker fork
    assert step.fork_figures["forks_replayed_calls"] == 0
    for p in kept:
        rec = calls(p)
        fp = fork_of(p, "checker")
        fork, fc = load_one(fp), calls(fp)
        assert fork.metadata["fork"]["diverged"] == [{"agent": "solver", "turn": 0}]
        assert fork.metadata["fork"]["reached"] == ["checker"]
        # the solver's prompt changed: its call was made, with the fork's seed, not replayed
        assert fc["solver"]["request"]["messages"] != rec["solver"]["request"]["messages"]
        assert fc["solver"]["request"]["seed"] != rec["solver"]["request"]["seed"]
        assert not any(e.attrs and e.attrs.get("replayed") for e in fork.events)
    # the credit still reads the forks' rewards
    batch = read_batch(kept, step.spec, "loo-fork", "agent")
    for row in batch.rows:
        p = kept[row.trace]
        assert row.advantage == pytest.approx(final(p) - final(fork_of(p, row.agent)))


def test_forks_are_reproducible_from_the_seeds(tmp_path: Path):
    """The same iteration twice: every fork asks and gets the same calls (its call cache, byte for
    byte), so a killed iteration run again (the loop starts it from scratch) makes the same forks."""
    _, first = collect(tmp_path / "a", gateway_teams.chain, group=2)
    _, again = collect(tmp_path / "b", gateway_teams.chain, group=2)
    forks = sorted((tmp_path / "a" / "iter-001" / "forks").glob("*.cache.jsonl"))
    assert len(forks) == 2 * len(first) == 8
    for f in forks:
        twin = tmp_path / "b" / "iter-001" / "forks" / f.name
        assert twin.read_bytes() == f.read_bytes()
