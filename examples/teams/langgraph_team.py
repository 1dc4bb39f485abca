"""A two-agent team written as a LangGraph graph (two LLM nodes, ``ChatOpenAI`` clients), trainable
through the orchestrace gateway.

``solve`` drafts an answer; ``check`` reads the question and the draft and gives the team's
answer. Nothing here knows about orchestrace but ``base_url``: each node's ``ChatOpenAI`` names
its agent in ``model``, which the gateway reads as the agent (and, with one adapter per agent, as
the adapter).

    orchestrace serve --agents solver,checker          # then run(question, "http://127.0.0.1:8000/runs/r1/v1")
    orchestrace train team --program examples/teams/langgraph_team.py:run --tasks countries
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph

AGENTS = ["solver", "checker"]
ANSWER_ONLY = "Reply with just the answer: a word or a name, nothing else."


class State(TypedDict, total=False):
    question: str
    draft: str
    answer: str


def _shots(examples: Sequence[tuple[str, str]]) -> list[BaseMessage]:
    return [m for q, a in examples for m in (HumanMessage(q), AIMessage(a))]


def run(question: str, base_url: str, examples: Sequence[tuple[str, str]] = ()) -> str:
    """The team's answer to ``question``; ``examples``: (question, answer) pairs shown first."""

    def llm(agent: str) -> ChatOpenAI:
        return ChatOpenAI(model=agent, base_url=base_url, api_key="unused", max_tokens=8, max_retries=0)

    solver, checker = llm("solver"), llm("checker")
    shots = _shots(examples)

    def solve(state: State) -> State:
        reply = solver.invoke([SystemMessage(ANSWER_ONLY), *shots, HumanMessage(state["question"])])
        return {"draft": str(reply.content)}

    def check(state: State) -> State:
        review = f"{state['question']}\nA teammate answered: {state['draft']}\nWhat is the right answer?"
        system = SystemMessage("A teammate answered the question. " + ANSWER_ONLY)
        reply = checker.invoke([system, *shots, HumanMessage(review)])
        return {"answer": str(reply.content)}

    graph = StateGraph(State)
    graph.add_node("solve", solve)
    graph.add_node("check", check)
    graph.add_edge(START, "solve")
    graph.add_edge("solve", "check")
    graph.add_edge("check", END)
    return graph.compile().invoke({"question": question})["answer"]
