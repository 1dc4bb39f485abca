"""Banks sampled from a real model (the offline SmolLM2-135M, or any runtime chat backend), each
question's samples optionally recorded as a vote run and the bank read back from those traces.

Apart from ``banks`` (the format, loading, the synthetic generator) because a recorded bank goes
through ``traces``, which reads banks: here both are below, neither imports this module.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any

from ...core.errors import OrchestraceError
from ...runtime.backends.base import ScoredText, summarise_logprobs
from .banks import Bank, BankQuestion
from .traces import bank_from_traces, check_traces, record_question


def build_bank(
    family_name: str,
    *,
    samples: int = 40,
    limit: int | None = None,
    question_ids: Sequence[str] | None = None,
    temperature: float = 0.7,
    seed: int = 0,
    model: Any = None,
    progress: Any = None,
    traces_dir: str | None = None,
) -> Bank:
    """Sample every question of a task family ``samples`` times from ``model`` (default: the
    offline SmolLM2-135M). ``model`` needs ``.sample(messages, n, max_new_tokens=, temperature=,
    seed=) -> list[str]``, or ``.sample_scored`` (same arguments) -> ``list[ScoredText]`` when it
    gives token log-probabilities, which the bank then keeps per sample (``logprob``); the
    per-question seed is derived from ``seed`` and the question id.

    With ``traces_dir`` every question's samples are recorded there as a vote run (the raw texts
    as worker returns, the canonical answers beside them, the prompt, seed and model in the
    config), each trace is validated, and the bank returned is the one read back from those traces
    (``traces.bank_from_traces``): the bank is a view over what was recorded."""
    from .families import family

    if samples < 1 or (limit is not None and limit < 1):  # --limit -1 kept all but the last question
        raise OrchestraceError("OT631", f"--samples and --limit must be >= 1, got {samples} and {limit}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise OrchestraceError("OT631", f"--temperature must be a finite number >= 0, got {temperature}")
    fam = family(family_name)
    if model is None:
        from ...runtime.backends.local import LocalModel

        model = LocalModel()
    model_name = getattr(model, "name", type(model).__name__)
    questions = fam.questions
    if question_ids is not None:  # a chosen subset, in the family's order
        wanted = set(question_ids)
        questions = tuple(q for q in questions if q.id in wanted)
    questions = questions[:limit] if limit is not None else questions
    out: list[BankQuestion] = []
    paths: list[str] = []
    for i, q in enumerate(questions):
        qseed = seed * 1_000_003 + int(hashlib.sha256(q.id.encode()).hexdigest()[:8], 16)
        messages = fam.messages(q)
        scored = _draw(model, messages, samples, fam.max_new_tokens, temperature, qseed)
        texts = [s.text for s in scored]
        logprob = [summarise_logprobs(s.logprobs) for s in scored]
        bq = BankQuestion(q.id, q.question, q.gold, [fam.canonical(t, q) for t in texts],
                          logprob=logprob if any(x is not None for x in logprob) else None)  # fmt: skip
        out.append(bq)
        if traces_dir is not None:
            sampling = {"messages": messages, "temperature": temperature, "seed": qseed, "model": model_name,
                        "max_tokens": fam.max_new_tokens}  # fmt: skip
            paths.append(record_question(bq, traces_dir, family_name, i, family_name, texts, sampling))
        if progress is not None:
            progress()
    meta = {
        "family": family_name,
        "model": model_name,
        "temperature": temperature,
        "seed": seed,
        "samples": samples,
    }
    if traces_dir is None:
        return Bank(family_name, out, meta)
    check_traces(paths)
    bank = bank_from_traces(paths, family_name)
    bank.meta.update(meta)
    return bank


def _draw(
    model: Any, messages: list[dict[str, str]], n: int, max_new_tokens: int, temperature: float, seed: int
) -> list[ScoredText]:
    kw = {"max_new_tokens": max_new_tokens, "temperature": temperature, "seed": seed}
    if hasattr(model, "sample_scored"):
        return list(model.sample_scored(messages, n, **kw))
    return [ScoredText(t, None) for t in model.sample(messages, n, **kw)]


class BackendSampler:
    """n samples of one prompt from a runtime chat backend (an OpenAI-compatible server, the
    scripted backend): one request per sample, seeded ``seed + i``; a failed call is an empty text."""

    def __init__(self, backend: Any, name: str = "default") -> None:
        self.backend, self.name = backend, name

    def sample_scored(
        self, messages: list[dict[str, str]], n: int, *, max_new_tokens: int, temperature: float, seed: int
    ) -> list[ScoredText]:
        """The texts with the token log-probabilities the backend gave (None where it gave none)."""
        import asyncio

        from ...runtime.backends.base import BackendError, ChatRequest

        failed: list[BackendError] = []

        async def one(i: int) -> ScoredText:
            req = ChatRequest(
                messages=messages, temperature=temperature, max_tokens=max_new_tokens, seed=seed + i
            )
            try:
                r = await self.backend.chat(req)
            except BackendError as e:
                failed.append(e)
                return ScoredText("", None)
            return ScoredText(r.text, r.logprobs)

        async def all_() -> list[ScoredText]:
            return list(await asyncio.gather(*(one(i) for i in range(n))))

        texts = asyncio.run(all_())
        if n and len(failed) == n:  # a server that is not there gave a bank of null samples, exit 0
            raise OrchestraceError("OT619", f"every sample of a question failed: {failed[0]}")
        return texts


def remote_sampler(base_url: str, model: str = "default", logprobs: bool = False) -> BackendSampler:
    """Samples from an OpenAI-compatible server (asking for token log-probabilities with ``logprobs``)."""
    from ...runtime.backends.openai_compat import OpenAICompatBackend

    return BackendSampler(OpenAICompatBackend(base_url, model=model, logprobs=logprobs), model)
