"""A two-agent team written with the OpenAI Agents SDK, trainable through the orchestrace gateway.

The solver answers the task; the checker reads the question and the solver's answer and gives the
team's answer. The agents are chained in code (the SDK's deterministic-flow pattern): the 135M
model behind the gateway cannot emit reliable tool calls, so no handoff is left to it. Nothing
here knows about orchestrace but ``base_url``: each agent's ``model`` is its name, which the
gateway reads as the agent (and, with one adapter per agent, as the adapter).

    orchestrace serve --agents solver,checker          # then run(question, "http://127.0.0.1:8000/runs/r1/v1")
    orchestrace train team --program examples/teams/agents_sdk_team.py:run --tasks countries
"""

from __future__ import annotations

from collections.abc import Sequence

from agents import Agent, ModelSettings, OpenAIChatCompletionsModel, Runner
from openai import AsyncOpenAI

AGENTS = ["solver", "checker"]
ANSWER_ONLY = "Reply with just the answer: a word or a name, nothing else."


def _shots(examples: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    return [
        m for q, a in examples for m in ({"role": "user", "content": q}, {"role": "assistant", "content": a})
    ]


async def run(question: str, base_url: str, examples: Sequence[tuple[str, str]] = ()) -> str:
    """The team's answer to ``question``; ``examples``: (question, answer) pairs shown first."""
    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)
    settings = ModelSettings(max_tokens=8)
    solver = Agent(
        name="solver",
        instructions=ANSWER_ONLY,
        model=OpenAIChatCompletionsModel(model="solver", openai_client=client),
        model_settings=settings,
    )
    checker = Agent(
        name="checker",
        instructions="A teammate answered the question. " + ANSWER_ONLY,
        model=OpenAIChatCompletionsModel(model="checker", openai_client=client),
        model_settings=settings,
    )
    first = await Runner.run(solver, [*_shots(examples), {"role": "user", "content": question}])
    review = f"{question}\nA teammate answered: {first.final_output}\nWhat is the right answer?"
    second = await Runner.run(checker, [*_shots(examples), {"role": "user", "content": review}])
    return str(second.final_output)
