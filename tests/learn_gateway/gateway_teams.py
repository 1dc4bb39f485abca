"""Teams for the gateway tests, written as a user would with the openai client: ``chain`` (a
solver, then a checker that reads the solver's answer), its async twin, and programs that fail
in each way a run can fail (raise, hang, never call the gateway) for the runs named in FAIL; and
a capable model stood in by a scripted OpenAI-compatible server (``upstream``), for tool calls
behind ``--server``."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import orjson

from orchestrace.learn.gateway.server import start_in_thread

AGENTS = ["solver", "checker"]
SHOTS = [
    {"role": "user", "content": "In which country is the city of Graz? Answer with just the country name."},
    {"role": "assistant", "content": "Austria"},
]
FAIL: dict[str, str] = {}  # run id -> "raise" | "hang" | "silent"
RELEASE = threading.Event()  # lets a hanging program go at the end of a test


def _run_of(base_url: str) -> str:
    return base_url.rstrip("/").split("/")[-2]


def _check_prompt(question: str, answer: str) -> str:
    return f"{question}\nA teammate answered: {answer}\nReply with the right answer, just the answer."


def chain(question: str, base_url: str, ask: str | None = None) -> str | None:
    how = FAIL.get(_run_of(base_url))
    if how == "silent":
        return "Austria"
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    first = client.chat.completions.create(
        model="solver", messages=[*SHOTS, {"role": "user", "content": ask or question}], max_tokens=6
    )
    answer = first.choices[0].message.content or ""
    if how == "raise":
        raise RuntimeError("the team's code failed")
    if how == "hang":
        RELEASE.wait(120)
        return None
    second = client.chat.completions.create(
        model="checker", messages=[{"role": "user", "content": _check_prompt(question, answer)}], max_tokens=6
    )
    return second.choices[0].message.content


ASKED = itertools.count()


def drifting(question: str, base_url: str) -> str | None:
    """The chain with a counter in the solver's prompt: no two runs ask the same, so a replay of a
    run diverges at its first call."""
    return chain(question, base_url, ask=f"{question} (attempt {next(ASKED)})")


async def achain(question: str, base_url: str) -> str | None:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    first = await client.chat.completions.create(
        model="solver", messages=[*SHOTS, {"role": "user", "content": question}], max_tokens=6
    )
    answer = first.choices[0].message.content or ""
    await client.chat.completions.create(
        model="checker", messages=[{"role": "user", "content": _check_prompt(question, answer)}], max_tokens=6
    )
    return None  # the run's last completion is the team's answer


def seeded(question: str, base_url: str) -> str | None:
    """One call with a fixed seed, as some frameworks send."""
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    reply = client.chat.completions.create(
        model="solver", messages=[{"role": "user", "content": question}], max_tokens=6, seed=1
    )
    return reply.choices[0].message.content


def not_a_team(config: dict) -> None:
    """A runtime program's signature (no base_url)."""


def reward_by_seed(trace) -> float:
    """A verifier for tests: 1 for runs with an even seed, else 0 (every group has both)."""
    return float(trace.metadata["runtime"]["seed"] % 2 == 0)


def reward_france(trace) -> float:
    """A verifier for tests: 1 when the team answered France."""
    return float(trace.metadata["outcome"].get("final") == "France")


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"call_{name}",
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(arguments).decode()},
    }


def completion(model: str, message: dict[str, Any]) -> dict[str, Any]:
    """A chat completion answering ``message`` (its finish reason from its tool calls)."""
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def upstream(reply: Callable[[dict[str, Any]], dict[str, Any]], seen: list[dict]) -> ThreadingHTTPServer:
    """A scripted OpenAI-compatible server on 127.0.0.1, serving in a thread: ``reply`` maps each
    request body to its response body; each body is appended to ``seen``."""

    class Scripted(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = orjson.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            out = orjson.dumps(reply(body))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    start_in_thread(server)  # type: ignore[arg-type]
    return server
