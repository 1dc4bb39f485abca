"""OpenAI-compatible Chat Completions over HTTP (vLLM, SGLang, Ollama, llama.cpp server, hosted APIs).

One POST to ``{base_url}/chat/completions`` per call; token usage comes from the ``usage`` block.
Every way the call can go wrong is mapped to a ``BackendError`` so the runtime can record it.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import orjson

from .base import BackendError, ChatRequest, ChatResponse, http_error


class OpenAICompatBackend:
    def __init__(
        self,
        base_url: str,
        *,
        model: str = "default",
        api_key: str | None = None,
        timeout: float = 60.0,
        price_in: float = 0.0,
        price_out: float = 0.0,
        logprobs: bool = False,
    ) -> None:
        """``price_in``/``price_out`` are USD per million tokens, for the USD budget; ``logprobs``
        asks the server for each sampled token's log-probability (not every server accepts it)."""
        self.name = "openai"
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.price_in, self.price_out = price_in, price_out
        self.logprobs = logprobs
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    @property
    def client(self) -> httpx.AsyncClient:
        """One connection pool per event loop: a backend reused by several ``asyncio.run`` (``bank
        build --base-url`` samples each question in its own) must not use connections of a closed loop."""
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=self._headers)
            self._client_loop = loop
        return self._client

    def body(self, req: ChatRequest) -> dict[str, Any]:
        b: dict[str, Any] = {
            "model": req.model or self.model,
            "messages": req.messages,
            "temperature": req.temperature,
            "max_tokens": req.max_tokens,
            "seed": req.seed,
        }
        if req.stop:
            b["stop"] = req.stop
        if self.logprobs:
            b["logprobs"] = True
        return b

    async def chat(self, req: ChatRequest) -> ChatResponse:
        url = f"{self.base_url}/chat/completions"
        try:
            r = await self.client.post(
                url, content=orjson.dumps(self.body(req)), headers={"Content-Type": "application/json"}
            )
        except httpx.TimeoutException as e:
            raise BackendError(
                "timeout", f"no answer within {self.timeout:g} s ({type(e).__name__})", retryable=True
            ) from None
        except (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError, httpx.WriteError) as e:
            raise BackendError("connection", f"{url}: {type(e).__name__}: {e}", retryable=True) from None
        if r.status_code != 200:
            ra = r.headers.get("retry-after")
            raise http_error(r.status_code, r.text, float(ra) if ra and _is_float(ra) else None)
        return self.parse(r.content, req)

    def parse(self, content: bytes, req: ChatRequest) -> ChatResponse:
        try:
            d = orjson.loads(content)
            choice = d["choices"][0]
            text = choice["message"]["content"]
            if not isinstance(text, str):
                raise TypeError("message.content is not a string")
            logprobs = _token_logprobs(choice.get("logprobs"))
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise BackendError(
                "malformed", f"not a chat completion ({type(e).__name__}: {e})", retryable=True
            ) from None
        usage = d.get("usage") or {}
        tin, tout = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        cost = (tin * self.price_in + tout * self.price_out) / 1e6
        return ChatResponse(
            text=text,
            tokens_in=tin,
            tokens_out=tout,
            model=str(d.get("model") or req.model or self.model),
            finish_reason=choice.get("finish_reason"),
            cost_usd=cost if cost else None,
            logprobs=logprobs,
        )

    async def aclose(self) -> None:
        if self._client is not None and self._client_loop is asyncio.get_running_loop():
            await self._client.aclose()
        self._client = None


def _token_logprobs(block: Any) -> list[float] | None:
    """``choices[0].logprobs.content[*].logprob`` (the Chat Completions shape); None when absent."""
    if block is None or block.get("content") is None:
        return None
    out = [float(t["logprob"]) for t in block["content"]]
    if any(x != x or x > 0 for x in out):
        raise TypeError("a token logprob is NaN or positive")
    return out


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True
