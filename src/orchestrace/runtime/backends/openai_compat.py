"""OpenAI-compatible Chat Completions over HTTP (vLLM, SGLang, Ollama, llama.cpp server, hosted APIs).

One POST to ``{base_url}/chat/completions`` per call; token usage comes from the ``usage`` block.
Every way the call can go wrong is mapped to a ``BackendError`` so the runtime can record it.
"""

from __future__ import annotations

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
    ) -> None:
        """``price_in``/``price_out`` are USD per million tokens, for the USD budget."""
        self.name = "openai"
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.price_in, self.price_out = price_in, price_out
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(timeout=timeout, headers=headers)

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
        return b

    async def chat(self, req: ChatRequest) -> ChatResponse:
        url = f"{self.base_url}/chat/completions"
        try:
            r = await self._client.post(
                url, content=orjson.dumps(self.body(req)), headers={"Content-Type": "application/json"}
            )
        except httpx.TimeoutException as e:
            raise BackendError(
                "timeout", f"no answer within {self.timeout:g} s ({type(e).__name__})", retryable=True
            ) from None
        except (httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError, httpx.WriteError) as e:
            raise BackendError("connection", f"{type(e).__name__}: {e}", retryable=True) from None
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
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as e:
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
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _is_float(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True
