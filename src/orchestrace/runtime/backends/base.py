"""The backend protocol: one async ``chat`` call, plain request/response structs, typed failures.

Failures are ``BackendError`` with a ``kind`` (http, timeout, connection, malformed) and whether
retrying can help (429 and 5xx, timeouts, dropped connections, garbled bodies); the runtime turns
each failed attempt into an error event and decides about retries, so backends never retry.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import msgspec
import orjson


class ChatRequest(msgspec.Struct, kw_only=True, omit_defaults=True):
    messages: list[dict[str, str]]
    model: str = ""
    temperature: float = 0.7
    max_tokens: int = 64
    seed: int = 0
    stop: list[str] | None = None


class TokenSample(msgspec.Struct, kw_only=True):
    """What a policy gradient needs from a call of a trainable backend: the token ids it saw and
    produced, the behaviour policy's log-probability of each produced token, which adapter answered."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    adapter: str
    temperature: float


class ChatResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""
    finish_reason: str | None = None
    cost_usd: float | None = None
    tokens: TokenSample | None = None  # trainable backends only; kept in the call cache
    logprobs: list[float] | None = None  # the model's log-probability of each sampled token, when given


@dataclass(frozen=True)
class ScoredText:
    """One completion and the model's log-probability of each of its tokens (None: not given)."""

    text: str
    logprobs: list[float] | None


class LogprobSummary(msgspec.Struct, frozen=True):
    """What a trace or a bank keeps of a completion's token log-probabilities: their mean (the
    per-token confidence), their minimum (the least sure token) and how many there were."""

    mean: float
    min: float
    tokens: int


LOGPROB_ATTRS = ("orchestrace.logprob_mean", "orchestrace.logprob_min", "orchestrace.logprob_tokens")
"""Event attributes for ``LogprobSummary``: OpenTelemetry's GenAI conventions name none for
log-probabilities, so they carry the project prefix."""


def summarise_logprobs(logprobs: list[float] | None) -> LogprobSummary | None:
    if not logprobs:
        return None
    return LogprobSummary(round(sum(logprobs) / len(logprobs), 6), round(min(logprobs), 6), len(logprobs))


def logprob_attrs(s: LogprobSummary) -> dict[str, Any]:
    return dict(zip(LOGPROB_ATTRS, (s.mean, s.min, s.tokens), strict=True))


def logprob_from_attrs(attrs: dict[str, Any]) -> LogprobSummary | None:
    """The summary an event recorded, or None when it has none (or a malformed one)."""
    mean, low, n = (attrs.get(k) for k in LOGPROB_ATTRS)
    ok = all(isinstance(x, int | float) and not isinstance(x, bool) for x in (mean, low)) and (
        isinstance(n, int) and not isinstance(n, bool) and n > 0
    )
    return LogprobSummary(float(mean), float(low), n) if ok else None  # type: ignore[arg-type]


class BackendError(Exception):
    """A failed call. ``retryable`` says whether the same request may succeed later."""

    def __init__(
        self,
        kind: str,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "message": self.args[0], "retryable": self.retryable}
        if self.status is not None:
            d["status"] = self.status
        if self.retry_after is not None:
            d["retry_after"] = self.retry_after
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BackendError:
        return cls(
            d["kind"],
            d["message"],
            status=d.get("status"),
            retryable=d["retryable"],
            retry_after=d.get("retry_after"),
        )

    def __str__(self) -> str:
        s = super().__str__()
        return f"{self.kind} {self.status}: {s}" if self.status is not None else f"{self.kind}: {s}"


def http_error(status: int, body: str, retry_after: float | None = None) -> BackendError:
    """429 and 5xx can pass; other 4xx are the request's fault and will not."""
    return BackendError(
        "http",
        body[:200] or "HTTP error",
        status=status,
        retryable=status == 429 or status >= 500,
        retry_after=retry_after,
    )


@runtime_checkable
class Backend(Protocol):
    """Anything with a name and an async ``chat``."""

    name: str

    async def chat(self, req: ChatRequest) -> ChatResponse: ...


def normalise(req: ChatRequest) -> dict[str, Any]:
    """The request as it matters for the answer: stripped contents, rounded temperature, no Nones."""
    d: dict[str, Any] = {
        "messages": [{"role": m["role"].strip(), "content": m["content"].strip()} for m in req.messages],
        "model": req.model,
        "temperature": round(float(req.temperature), 6),
        "max_tokens": int(req.max_tokens),
        "seed": int(req.seed),
    }
    if req.stop:
        d["stop"] = list(req.stop)
    return d


def content_key(kind: str, payload: Any) -> str:
    """Content address of a call: sha256 of the canonical JSON of (kind, payload)."""
    blob = orjson.dumps([kind, payload], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()[:32]


def request_key(req: ChatRequest) -> str:
    return content_key("chat", normalise(req))
