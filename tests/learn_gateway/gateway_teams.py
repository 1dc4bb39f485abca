"""Teams for the gateway tests, written as a user would with the openai client: ``chain`` (a
solver, then a checker that reads the solver's answer), its async twin, and programs that fail
in each way a run can fail (raise, hang, never call the gateway) for the runs named in FAIL."""

from __future__ import annotations

import itertools
import threading

import openai

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
