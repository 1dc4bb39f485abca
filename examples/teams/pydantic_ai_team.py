"""A two-agent team written with Pydantic AI, recorded (and trainable) through the orchestrace
gateway.

The solver answers the task; the checker reads the question and the solver's answer and gives the
team's answer. The agents are chained in code (Pydantic AI's "programmatic agent hand-off": one
agent runs, then the application calls the next), since the 135M model behind the gateway cannot
emit reliable tool calls; with a capable model behind ``--server`` the same agents can delegate
through tools (tests/learn_gateway/test_gateway_pydantic_ai.py). Nothing here knows about
orchestrace but ``base_url``: each agent's ``OpenAIChatModel`` is named after the agent, which the
gateway reads as the agent (and, with one adapter per agent, as the adapter).

    orchestrace serve --agents solver,checker          # then run(question, "http://127.0.0.1:8000/runs/r1/v1")
    orchestrace train team --program examples/teams/pydantic_ai_team.py:run --tasks countries
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai import Agent, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider
from pydantic_ai.settings import ModelSettings

AGENTS = ["solver", "checker"]
ANSWER_ONLY = "Reply with just the answer: a word or a name, nothing else."


def _shots(examples: Sequence[tuple[str, str]]) -> list[ModelRequest | ModelResponse]:
    return [
        m
        for q, a in examples
        for m in (ModelRequest(parts=[UserPromptPart(q)]), ModelResponse(parts=[TextPart(a)]))
    ]


async def run(question: str, base_url: str, examples: Sequence[tuple[str, str]] = ()) -> str:
    """The team's answer to ``question``; ``examples``: (question, answer) pairs shown first."""
    provider = OpenAICompatibleProvider("orchestrace", base_url=base_url, api_key="unused")
    settings = ModelSettings(max_tokens=8)
    solver = Agent(
        OpenAIChatModel("solver", provider=provider),
        name="solver",
        instructions=ANSWER_ONLY,
        model_settings=settings,
    )
    checker = Agent(
        OpenAIChatModel("checker", provider=provider),
        name="checker",
        instructions="A teammate answered the question. " + ANSWER_ONLY,
        model_settings=settings,
    )
    shots = _shots(examples)
    draft = await solver.run(question, message_history=shots)
    review = f"{question}\nA teammate answered: {draft.output}\nWhat is the right answer?"
    final = await checker.run(review, message_history=shots)
    return final.output
