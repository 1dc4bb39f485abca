"""The OpenAI chat-completions protocol as the gateway speaks it: a request read into a typed
:class:`CallSpec` (every malformed part a :class:`GatewayError` naming the parameter, HTTP 400 in
OpenAI's error shape), and the response, stream chunks and errors written back.

Only what a chat completion needs is read; other fields a framework sends (``store``,
``parallel_tool_calls``, ``user``, ``metadata``, ...) are accepted and ignored, as a server that
does not support them would. ``n`` > 1 is refused (one completion per call: one event each).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

MAX_TOP_LOGPROBS = 20
ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class GatewayError(Exception):
    """A call the gateway refuses or could not serve, in OpenAI's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> bytes:
        return orjson.dumps(
            {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}
        )


def bad(message: str, param: str | None = None, code: str | None = None) -> GatewayError:
    return GatewayError(400, message, param=param, code=code)


@dataclass(frozen=True)
class CallSpec:
    """One chat-completion call, read and checked: what the completers and the recording need."""

    model: str  # as the request named it (echoed back)
    messages: list[dict[str, str]]  # role and text content only (tool calls written as text)
    temperature: float | None
    max_tokens: int | None
    seed: int | None
    stop: list[str]
    stream: bool
    include_usage: bool
    logprobs: bool
    top_logprobs: int
    tools: list[dict[str, Any]] | None
    raw: dict[str, Any] = field(repr=False)  # the request body (forwarded as is, model replaced)

    def prompt_text(self) -> str:
        """Every message's text, one per line: what data-flow matching searches."""
        return "\n".join(m["content"] for m in self.messages)


def _text_of(content: Any, param: str) -> str:
    """A message's content as text: a string, null, or a list of text parts (images refused)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise bad("a content part must be an object with a 'type'", f"{param}[{j}]")
            if part["type"] in ("text", "input_text", "output_text"):
                if not isinstance(part.get("text"), str):
                    raise bad("a text part needs a string 'text'", f"{param}[{j}].text")
                out.append(part["text"])
            elif part["type"] != "refusal":
                raise bad(f"content parts of type {part['type']!r} are not supported (text only)", param)
        return "".join(out)
    raise bad("content must be a string, null or a list of text parts", param)


def _message(m: Any, i: int) -> dict[str, str]:
    param = f"messages[{i}]"
    if not isinstance(m, dict):
        raise bad("each message must be an object", param)
    role = m.get("role")
    if role not in ROLES:
        raise bad(f"role must be one of {', '.join(ROLES)}", f"{param}.role")
    text = _text_of(m.get("content"), f"{param}.content")
    calls = m.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, list):
            raise bad("tool_calls must be a list", f"{param}.tool_calls")
        shown = []
        for j, c in enumerate(calls):
            fn = c.get("function") if isinstance(c, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                raise bad("a tool call needs function.name", f"{param}.tool_calls[{j}]")
            shown.append(f"[call {fn['name']}({fn.get('arguments') or ''})]")
        text = "\n".join([text, *shown]) if text else "\n".join(shown)
    return {"role": "system" if role == "developer" else role, "content": text}


def _number(body: dict[str, Any], name: str, lo: float, hi: float) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
        raise bad(f"{name} must be a number from {lo:g} to {hi:g}", name)
    return float(v)


def _integer(body: dict[str, Any], name: str, lo: int, hi: int) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise bad(f"{name} must be an integer from {lo} to {hi}", name)
    return v


def parse_call(raw: bytes, max_tokens_cap: int) -> CallSpec:
    """Read a chat-completion request body; every problem is a 400 naming the parameter."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise bad(f"the request body is not JSON ({e})") from None
    if not isinstance(body, dict):
        raise bad("the request body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise bad("model is required (it names the agent, or the adapter)", "model")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise bad("messages must be a non-empty list", "messages")
    messages = [_message(m, i) for i, m in enumerate(msgs)]
    if body.get("n", 1) not in (1, None) or isinstance(body.get("n"), bool):
        raise bad("only n = 1 is supported (one completion per call)", "n")
    max_tokens = _integer(body, "max_completion_tokens", 1, max_tokens_cap)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1, max_tokens_cap)
    stop = body.get("stop")
    if stop is None:
        stops: list[str] = []
    elif isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        stops = list(stop)
    else:
        raise bad("stop must be a string or a list of strings", "stop")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise bad("stream must be a boolean", "stream")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise bad("stream_options must be an object", "stream_options")
    logprobs = body.get("logprobs", False)
    if logprobs is None:
        logprobs = False
    if not isinstance(logprobs, bool):
        raise bad("logprobs must be a boolean", "logprobs")
    top = _integer(body, "top_logprobs", 0, MAX_TOP_LOGPROBS) or 0
    if top and not logprobs:
        raise bad("top_logprobs needs logprobs: true", "top_logprobs")
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise bad("tools must be a list of objects", "tools")
    return CallSpec(
        model=model,
        messages=messages,
        temperature=_number(body, "temperature", 0.0, 2.0),
        max_tokens=max_tokens,
        seed=_integer(body, "seed", -(2**63), 2**63 - 1),
        stop=stops,
        stream=stream,
        include_usage=bool(opts.get("include_usage")),
        logprobs=logprobs,
        top_logprobs=top,
        tools=tools or None,
        raw=body,
    )


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: list[tuple[str, float]]


@dataclass(frozen=True)
class Completion:
    """What a completer returns for one call."""

    text: str | None
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str
    tokens_in: int
    tokens_out: int
    model: str  # the model or adapter that answered, as the backend names it
    logprobs: list[TokenLogprob] | None = None
    token_sample: Any = None  # runtime.backends.base.TokenSample of a trainable backend

    def message(self) -> dict[str, Any]:
        m: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            m["tool_calls"] = self.tool_calls
        return m


def _logprob_entry(t: TokenLogprob) -> dict[str, Any]:
    return {
        "token": t.token,
        "logprob": t.logprob,
        "bytes": list(t.token.encode("utf-8")),
        "top_logprobs": [{"token": s, "logprob": lp, "bytes": list(s.encode("utf-8"))} for s, lp in t.top],
    }


def _logprobs(c: Completion, call: CallSpec) -> dict[str, Any] | None:
    if not call.logprobs or c.logprobs is None:
        return None
    return {"content": [_logprob_entry(t) for t in c.logprobs], "refusal": None}


def _usage(c: Completion) -> dict[str, int]:
    return {
        "prompt_tokens": c.tokens_in,
        "completion_tokens": c.tokens_out,
        "total_tokens": c.tokens_in + c.tokens_out,
    }


def new_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"


def response_body(c: Completion, call: CallSpec, cid: str) -> bytes:
    return orjson.dumps(
        {
            "id": cid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": call.model,
            "choices": [
                {
                    "index": 0,
                    "message": c.message(),
                    "logprobs": _logprobs(c, call),
                    "finish_reason": c.finish_reason,
                }
            ],
            "usage": _usage(c),
        }
    )


def stream_events(c: Completion, call: CallSpec, cid: str) -> list[bytes]:
    """The completion as server-sent events: the role, the content (and tool calls), the finish
    reason, the usage when asked for, then ``[DONE]``. The whole completion is sampled before the
    first event (calls are sampled in batches), so streaming changes the shape, not the latency."""
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, logprobs: Any = None) -> bytes:
        d = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": call.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}],
        }
        return b"data: " + orjson.dumps(d) + b"\n\n"

    out = [chunk({"role": "assistant", "content": ""})]
    if c.text:
        out.append(chunk({"content": c.text}, logprobs=_logprobs(c, call)))
    for i, tc in enumerate(c.tool_calls or ()):
        out.append(chunk({"tool_calls": [{"index": i, **tc}]}))
    out.append(chunk({}, c.finish_reason))
    if call.include_usage:
        u = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": call.model}
        out.append(b"data: " + orjson.dumps({**u, "choices": [], "usage": _usage(c)}) + b"\n\n")
    out.append(b"data: [DONE]\n\n")
    return out


def models_body(names: list[str]) -> bytes:
    return orjson.dumps(
        {
            "object": "list",
            "data": [{"id": n, "object": "model", "created": 0, "owned_by": "orchestrace"} for n in names],
        }
    )
