"""Tools through the gateway, with a capable model stood in by a scripted OpenAI-compatible server
on 127.0.0.1 behind ``--server``: an Agents SDK team that hands off (triage -> writer) and runs an
agent as a tool (writer -> researcher) completes, and its trace holds the handoff, the tool call
and the agent-as-tool structure (posted by the SDK's spans) beside the gateway's own calls."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from gateway_teams import completion, tool_call, upstream

from orchestrace.core.io import load_one
from orchestrace.learn.gateway.launch import ServeOptions, build
from orchestrace.learn.gateway.server import GatewayServer, start_in_thread

FACTS = "Paris has been the capital of France since 987."
ESSAY = "Paris, capital since 987, is France's heart."


def scripted_reply(body: dict) -> dict:
    """What a capable model would answer each agent (the gateway forwards model = the agent)."""
    model, messages = body["model"], body["messages"]
    tools = [t["function"]["name"] for t in body.get("tools") or ()]
    answered = any(m["role"] == "tool" and FACTS in str(m.get("content")) for m in messages)
    if model == "triage":
        message = {"role": "assistant", "content": None, "tool_calls": [tool_call("transfer_to_writer", {})]}
    elif model == "writer" and "ask_researcher" in tools and not answered:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("ask_researcher", {"input": "When did Paris become the capital?"})],
        }
    elif model == "writer":
        message = {"role": "assistant", "content": ESSAY}
    else:
        message = {"role": "assistant", "content": FACTS}
    return completion(model, message)


SEEN: list[dict] = []  # the requests the scripted model was sent, this test's


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayServer]:
    SEEN.clear()
    model = upstream(scripted_reply, SEEN)
    opts = ServeOptions(
        port=0,
        runs=str(tmp_path),
        agents="triage,writer,researcher",
        server=f"http://127.0.0.1:{model.server_address[1]}",
    )
    server = build(opts)
    start_in_thread(server)
    yield server
    server.shutdown()
    server.server_close()
    server.gateway.close()
    model.shutdown()
    model.server_close()


async def sdk_team(base_url: str) -> str:
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0)

    def model(name: str) -> OpenAIChatCompletionsModel:
        return OpenAIChatCompletionsModel(model=name, openai_client=client)

    researcher = Agent(name="researcher", instructions="Find facts.", model=model("researcher"))
    writer = Agent(
        name="writer",
        instructions="Write one sentence.",
        model=model("writer"),
        tools=[researcher.as_tool(tool_name="ask_researcher", tool_description="Ask the researcher.")],
    )
    triage = Agent(name="triage", instructions="Route the request.", model=model("triage"), handoffs=[writer])
    result = await Runner.run(triage, "Write about Paris.", run_config=RunConfig(workflow_name="essay"))
    return str(result.final_output)


@pytest.mark.timeout(120)
def test_handoffs_and_agents_as_tools_work_and_join_the_trace(gateway):
    from agents import set_trace_processors, set_tracing_disabled

    from orchestrace.learn.gateway.spans import PostSpans

    base = f"{gateway.url}/runs/essay/v1"
    # ours alone: the SDK's default exporter would send the spans to OpenAI's backend
    set_trace_processors([PostSpans(base)])  # one process here; any process would do the same
    # tracing on even where OPENAI_AGENTS_DISABLE_TRACING=1 (as CI sets it): no span, no structure
    set_tracing_disabled(False)
    try:
        assert asyncio.run(sdk_team(base)) == ESSAY
    finally:
        set_trace_processors([])
        set_tracing_disabled(os.environ.get("OPENAI_AGENTS_DISABLE_TRACING", "").lower() in ("1", "true"))
    assert [b["model"] for b in SEEN] == ["triage", "writer", "researcher", "writer"]
    assert {t["function"]["name"] for t in SEEN[1]["tools"]} == {"ask_researcher"}
    tr = load_one(gateway.gateway.finish_run("essay"))  # validated
    ev = {e.id: e for e in tr.events}
    returns = [e for e in tr.events if e.type == "return"]
    assert [e.agent for e in returns] == ["triage", "writer", "researcher", "writer"]
    assert returns[0].attrs["tool_calls"] == ["transfer_to_writer"]
    assert returns[1].attrs["tool_calls"] == ["ask_researcher"]
    into = {e.id: [(ev[x.src], x.type) for x in tr.edges if x.dst == e.id] for e in tr.events}
    # the handoff: a message from triage to writer, read by the writer's first call
    handoff = next(e for e in tr.events if e.type == "message" and (e.attrs or {}).get("kind") == "handoff")
    assert (handoff.agent, handoff.to) == ("triage", "writer")
    assert (handoff, "message") in into[returns[1].id]
    # the agent as a tool: the writer's tool call feeds the researcher's call, whose answer is the
    # tool's result, which the writer's second call reads (also found in its prompt: data flow)
    call = next(e for e in tr.events if e.type == "tool_call")
    result = next(e for e in tr.events if e.type == "tool_result")
    assert (call.agent, call.tool, result.agent, result.call_id) == (
        "writer",
        "ask_researcher",
        "writer",
        call.call_id,
    )
    assert (call, "message") in into[returns[2].id]
    assert (returns[2], "return") in into[result.id]
    second_ask = next(ev[x.src] for x in tr.edges if x.dst == returns[3].id and ev[x.src].type == "message")
    assert (result, "causal") in into[second_ask.id]
    assert (returns[2], "message") in into[returns[3].id]
    assert {"from": returns[2].id, "match": "verbatim"} in returns[3].attrs["data_flow"]


def test_tool_calls_stream_in_the_shape_the_openai_client_reads(gateway):
    import openai

    client = openai.OpenAI(base_url=f"{gateway.url}/runs/s/v1", api_key="unused")
    tools = [
        {"type": "function", "function": {"name": "transfer_to_writer", "parameters": {"type": "object"}}}
    ]
    chunks = list(
        client.chat.completions.create(
            model="triage", messages=[{"role": "user", "content": "hi"}], tools=tools, stream=True
        )
    )
    calls = [tc for c in chunks if c.choices for tc in c.choices[0].delta.tool_calls or ()]
    assert [(c.index, c.id, c.function.name, c.function.arguments) for c in calls] == [
        (0, "call_transfer_to_writer", "transfer_to_writer", "{}")
    ]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    whole = client.chat.completions.create(
        model="triage", messages=[{"role": "user", "content": "hi"}], tools=tools
    )
    assert whole.choices[0].message.tool_calls[0].function.name == "transfer_to_writer"
    assert SEEN[-1]["tools"] == tools  # passed through as given
