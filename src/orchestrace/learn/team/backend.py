"""The trainable runtime backend: every call answered by a LoRA adapter of the local model, batched.

Calls arriving together (the solvers of one run, and of every run executing concurrently in the
same event loop) are sampled in one batch: a call waits until the event loop has nothing else to
do, then the whole queue goes to :meth:`TeamModel.sample` in a worker thread. Each response
carries a :class:`TokenSample` (token ids, behaviour log-probs, adapter), which the call cache
stores beside the trace; the adapter is the request's ``model`` field.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ...runtime.backends.base import BackendError, ChatRequest, ChatResponse, TokenSample
from .model import SampleRequest, TeamModel, ended


@dataclass
class _Pending:
    req: ChatRequest
    prompt_ids: tuple[int, ...]
    future: asyncio.Future[ChatResponse]


class TrainableBackend:
    """A runtime backend over a :class:`TeamModel`; ``batches`` counts forward batches (for tests/bench)."""

    def __init__(self, model: TeamModel, *, idle_rounds: int = 20) -> None:
        self.name = "trainable-smollm2"
        self.model = model
        self.idle_rounds = idle_rounds
        self.batches = 0
        self.batch_sizes: list[int] = []
        self._queue: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None

    async def chat(self, req: ChatRequest) -> ChatResponse:
        adapter = req.model
        if adapter not in self.model.adapters:
            raise BackendError(
                "malformed",
                f"no adapter {adapter!r} (this model has {', '.join(self.model.adapters)})",
                retryable=False,
            )
        loop = asyncio.get_running_loop()
        pending = _Pending(req, tuple(self.model.encode(req.messages)), loop.create_future())
        self._queue.append(pending)
        if self._flusher is None or self._flusher.done():
            self._flusher = loop.create_task(self._flush())
        return await pending.future

    async def _flush(self) -> None:
        """Wait until no new call has arrived for ``idle_rounds`` loop turns, then sample the queue."""
        seen = -1
        quiet = 0
        while quiet < self.idle_rounds:
            await asyncio.sleep(0)
            quiet = quiet + 1 if len(self._queue) == seen else 0
            seen = len(self._queue)
        batch, self._queue = self._queue, []
        reqs = [
            SampleRequest(p.prompt_ids, p.req.model, p.req.temperature, p.req.max_tokens, p.req.seed)
            for p in batch
        ]
        try:
            outs = await asyncio.to_thread(self.model.sample, reqs)
        except Exception as e:  # a failed batch fails its calls (recorded as errors), not the loop
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(BackendError("exception", f"{type(e).__name__}: {e}"))
            return
        finally:
            if self._queue:  # calls that arrived during the batch get their own flush
                self._flusher = asyncio.get_running_loop().create_task(self._flush())
        self.batches += 1
        self.batch_sizes.append(len(batch))
        for p, o in zip(batch, outs, strict=True):
            if p.future.done():  # its caller timed out or was cancelled
                continue
            p.future.set_result(
                ChatResponse(
                    text=self.model.decode(o.completion_ids),
                    tokens_in=len(p.prompt_ids),
                    tokens_out=len(o.completion_ids),
                    model=p.req.model,
                    finish_reason="stop" if ended(o.completion_ids, self.model.eos_ids) else "length",
                    tokens=TokenSample(
                        prompt_ids=list(p.prompt_ids),
                        completion_ids=o.completion_ids,
                        logprobs=o.logprobs,
                        adapter=p.req.model,
                        temperature=float(p.req.temperature),
                    ),
                )
            )
