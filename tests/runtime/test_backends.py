"""The OpenAI-compatible backend against a real HTTP server: every failure is a typed error."""

from __future__ import annotations

import asyncio

import pytest

from orchestrace.runtime.backends.base import BackendError, ChatRequest, request_key
from orchestrace.runtime.backends.openai_compat import OpenAICompatBackend


def _ask(server, content, timeout=5.0):
    async def go():
        b = OpenAICompatBackend(server.url, model="m", timeout=timeout)
        try:
            return await b.chat(
                ChatRequest(messages=[{"role": "user", "content": content}], max_tokens=4, seed=3)
            )
        finally:
            await b.aclose()

    return asyncio.run(go())


def test_ok_reply_and_usage(server):
    r = _ask(server, 'opposite of "hot"?')
    assert (r.text, r.tokens_in, r.tokens_out, r.model) == ("cold", 3, 1, "m")
    sent = server.requests[0]
    assert (
        sent["seed"] == 3
        and sent["max_tokens"] == 4
        and sent["messages"][0]["content"] == 'opposite of "hot"?'
    )


@pytest.mark.parametrize(
    ("action", "kind", "status", "retryable"),
    [
        ("429", "http", 429, True),
        ("500", "http", 500, True),
        ("malformed", "malformed", None, True),
        ("close", "connection", None, True),
        ("slow", "timeout", None, True),
    ],
)
def test_failures_are_typed(server, action, kind, status, retryable):
    server.plan = {"x": [action]}
    with pytest.raises(BackendError) as ei:
        _ask(server, "x", timeout=0.3)
    e = ei.value
    assert (e.kind, e.status, e.retryable) == (kind, status, retryable)
    if action == "429":
        assert e.retry_after == 0.0
    if action == "close":  # 'ConnectError: All connection attempts failed' did not say where it tried
        assert f"{server.url}/chat/completions: " in str(e)


def test_request_key_ignores_formatting_but_not_content():
    a = ChatRequest(messages=[{"role": "user", "content": "hi "}], temperature=0.7)
    b = ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=0.70000000001)
    c = ChatRequest(messages=[{"role": "user", "content": "hi"}], temperature=0.7, seed=1)
    assert request_key(a) == request_key(b) != request_key(c)
