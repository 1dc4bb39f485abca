"""A scripted backend for tests and offline demos: answers are a pure function of the request.

``rules`` maps a substring of the last user message to a reply (first match wins); otherwise
``choices`` are drawn with a generator seeded by (backend seed, request seed, prompt), so a run
with the same seed gets the same answers in any order. ``failures`` injects BackendErrors for
the first calls that match a substring, and ``delay`` makes calls take real time.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections.abc import Callable

from .base import BackendError, ChatRequest, ChatResponse


class ScriptedBackend:
    def __init__(
        self,
        *,
        rules: dict[str, str] | None = None,
        choices: list[str] | None = None,
        fn: Callable[[ChatRequest], str] | None = None,
        seed: int = 0,
        delay: float | Callable[[ChatRequest], float] = 0.0,
        failures: list[tuple[str, BackendError]] | None = None,
        model: str = "scripted",
    ) -> None:
        self.name = "scripted"
        self.rules = rules or {}
        self.choices = choices or ["yes", "no"]
        self.fn = fn
        self.seed = seed
        self.delay = delay
        self.failures = list(failures or [])
        self.model = model
        self.calls = 0

    def reply(self, req: ChatRequest) -> str:
        last = next((m["content"] for m in reversed(req.messages) if m["role"] == "user"), "")
        if self.fn is not None:
            return self.fn(req)
        for pat, text in self.rules.items():
            if pat in last:
                return text
        h = hashlib.sha256(f"{self.seed}|{req.seed}|{last}".encode()).digest()
        return random.Random(h).choice(self.choices)

    async def chat(self, req: ChatRequest) -> ChatResponse:
        self.calls += 1
        d = self.delay(req) if callable(self.delay) else self.delay
        if d:
            await asyncio.sleep(d)
        last = next((m["content"] for m in reversed(req.messages) if m["role"] == "user"), "")
        for i, (pat, err) in enumerate(self.failures):
            if pat in last:
                del self.failures[i]
                raise err
        text = self.reply(req)
        tin = sum(len(m["content"].split()) for m in req.messages)
        return ChatResponse(
            text=text, tokens_in=tin, tokens_out=len(text.split()), model=self.model, finish_reason="stop"
        )
