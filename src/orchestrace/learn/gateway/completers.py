"""What answers a gateway call: the trainable model (or a vLLM the trainer pushes its adapters to),
through the runtime backend that the ``team`` program uses, or any OpenAI-compatible server the
request is forwarded to.

:class:`BackendCompleter` batches like a ``team`` program run: calls that reach the gateway
within ``batch_window`` seconds of each other are handed to the backend in one event-loop turn, so
the trainable backend samples them in one batch (HTTP calls of concurrent runs arrive a few
milliseconds apart, too far apart for the backend's own idle-turn batching).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

import httpx
import orjson

from ...runtime.backends.base import BackendError, ChatRequest
from .protocol import CallSpec, Completion, GatewayError, TokenLogprob


class Completer(Protocol):
    """Answers one call; ``adapters``: the adapter names it serves (None: whatever the server has)."""

    name: str

    @property
    def adapters(self) -> list[str] | None: ...

    async def complete(self, req: ChatRequest, call: CallSpec) -> Completion: ...


class SerialModel:
    """A :class:`TeamModel` whose forward passes run one at a time: the backend's batches (in a
    worker thread) and the gateway's top-log-prob passes both switch the active adapter."""

    def __init__(self, model: Any) -> None:
        self.inner = model
        self.lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def sample(self, requests: list[Any]) -> list[Any]:
        with self.lock:
            return self.inner.sample(requests)

    def top_logprobs(
        self, adapter: str, prompt: list[int], completion: list[int], temperature: float, k: int
    ) -> list[list[tuple[int, float]]]:
        """The k most likely tokens (and their log-probabilities under softmax(logits / T)) at each
        completion position, under ``adapter``."""
        m = self.inner
        torch = m.torch
        with self.lock, torch.inference_mode():
            m.use(adapter)
            inner = m.model.get_base_model()
            ids = torch.tensor([list(prompt) + list(completion[:-1])], dtype=torch.long)
            logits = inner(input_ids=ids).logits[0, len(prompt) - 1 :].float()
            logp = torch.log_softmax(logits / max(temperature, 1e-6), dim=-1)
            vals, idx = logp.topk(k, dim=-1)
        return [
            [(int(i), float(v)) for i, v in zip(ri.tolist(), rv.tolist(), strict=True)]
            for ri, rv in zip(idx, vals, strict=True)
        ]


class BackendCompleter:
    """Calls answered by a runtime backend: the trainable model's
    (:class:`~orchestrace.learn.team.backend.TrainableBackend`) or a served one's, whose responses
    carry token samples, over ``model`` (the local copy: tokenizer, adapters, top log-probs); or
    any other runtime backend (``model`` None: no token limit, no log-probs)."""

    def __init__(
        self,
        backend: Any,
        model: SerialModel | None,
        *,
        batch_window: float = 0.01,
        max_prompt_tokens: int = 4096,
    ) -> None:
        self.backend = backend
        self.model = model
        self.name = str(getattr(backend, "name", "trainable"))
        self.batch_window = batch_window
        self.max_prompt_tokens = max_prompt_tokens
        self._window: asyncio.Future[None] | None = None

    @property
    def adapters(self) -> list[str] | None:
        return list(self.model.adapters) if self.model is not None else None

    async def _gather(self) -> None:
        """Wait until the current batch window closes (the first call of a window opens it)."""
        if self.batch_window <= 0:
            return
        if self._window is None or self._window.done():
            loop = asyncio.get_running_loop()
            self._window = loop.create_future()
            loop.call_later(self.batch_window, _close, self._window)
        await asyncio.shield(self._window)

    async def complete(self, req: ChatRequest, call: CallSpec) -> Completion:
        n = len(self.model.encode(req.messages)) if self.model is not None else 0
        if n > self.max_prompt_tokens:
            raise GatewayError(
                400,
                f"the prompt has {n} tokens; this gateway takes at most {self.max_prompt_tokens}",
                param="messages",
                code="context_length_exceeded",
            )
        await self._gather()
        out = await self.backend.chat(req)
        ts = out.tokens
        lps: list[TokenLogprob] | None = None
        if ts is not None and call.logprobs and self.model is not None:
            tops: list[list[tuple[int, float]]] = [[] for _ in ts.completion_ids]
            if call.top_logprobs and ts.completion_ids:
                tops = await asyncio.to_thread(
                    self.model.top_logprobs,
                    ts.adapter,
                    ts.prompt_ids,
                    ts.completion_ids,
                    ts.temperature,
                    call.top_logprobs,
                )
            piece = self.model.tokenizer.decode
            lps = [
                TokenLogprob(piece([t]), lp, [(piece([i]), v) for i, v in top])
                for t, lp, top in zip(ts.completion_ids, ts.logprobs, tops, strict=True)
            ]
        return Completion(
            text=out.text,
            tool_calls=None,
            finish_reason=out.finish_reason or "stop",
            tokens_in=out.tokens_in,
            tokens_out=out.tokens_out,
            model=out.model,
            logprobs=lps,
            token_sample=ts,
        )


def _close(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class ForwardCompleter:
    """Each call forwarded to an OpenAI-compatible server with ``model`` = the call's adapter (a
    vLLM serving LoRA adapters by name routes on it); tools and tool calls pass through. The
    server's token ids are not asked for, so these calls are recorded but not trainable."""

    def __init__(self, base_url: str, *, timeout: float = 300.0, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.name = "forward"
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._client: httpx.AsyncClient | None = None

    @property
    def adapters(self) -> list[str] | None:
        return None

    async def complete(self, req: ChatRequest, call: CallSpec) -> Completion:
        body = {k: v for k, v in call.raw.items() if k not in ("stream", "stream_options")}
        body["model"] = req.model
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout)
        try:
            r = await self._client.post(
                f"{self.base_url}/chat/completions", content=orjson.dumps(body), headers=self.headers
            )
        except httpx.HTTPError as e:
            raise BackendError("connection", f"{self.base_url}: {type(e).__name__}", retryable=True) from None
        if r.status_code != 200:
            raise _upstream_error(r)
        try:
            d = r.json()
            choice = d["choices"][0]
            msg = choice["message"]
            usage = d.get("usage") or {}
            lp = (choice.get("logprobs") or {}).get("content")
            lps = None
            if isinstance(lp, list):
                lps = [
                    TokenLogprob(
                        str(t["token"]),
                        float(t["logprob"]),
                        [(str(x["token"]), float(x["logprob"])) for x in t.get("top_logprobs") or ()],
                    )
                    for t in lp
                ]
            return Completion(
                text=msg.get("content"),
                tool_calls=msg.get("tool_calls") or None,
                finish_reason=choice.get("finish_reason") or "stop",
                tokens_in=int(usage.get("prompt_tokens") or 0),
                tokens_out=int(usage.get("completion_tokens") or 0),
                model=str(d.get("model") or req.model),
                logprobs=lps,
            )
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise BackendError("malformed", f"not a chat completion ({type(e).__name__})") from None


def _upstream_error(r: httpx.Response) -> GatewayError:
    """The server's own error, passed on (its 4xx are the request's fault; the rest a 502)."""
    try:
        err = r.json()["error"]
        message = str(err.get("message") or err)
    except (ValueError, KeyError, TypeError, AttributeError):
        message = f"HTTP {r.status_code}"
    if 400 <= r.status_code < 500:
        return GatewayError(r.status_code, f"the server refused the call: {message}")
    return GatewayError(502, f"the server failed: {message}", type="server_error")
