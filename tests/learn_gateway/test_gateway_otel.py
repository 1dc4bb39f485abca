"""OpenTelemetry spans into a gateway run: the real opentelemetry-sdk and its OTLP/HTTP exporter
(protobuf) sending to a real gateway on 127.0.0.1 with a scripted backend. Hand-made OTel GenAI
spans (``invoke_agent``, ``execute_tool``, ``gen_ai.caller.*``, ``gen_ai.transfer.*``) around
real openai-client calls are merged into the run's trace: the LLM spans joined to the calls the
gateway recorded (never twice), the tools and the invocations as events and edges, checked by
hand; and every malformed export refused in OTLP's shape."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from gateway_teams import completion, tool_call
from gateway_teams import upstream as scripted_server

from orchestrace.core.io import load_one
from orchestrace.learn.gateway.completers import BackendCompleter
from orchestrace.learn.gateway.launch import ServeOptions, build
from orchestrace.learn.gateway.server import GatewayServer, start_in_thread
from orchestrace.runtime.backends.scripted import ScriptedBackend

pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402

RULES = {
    "Plan": "Look it up, then ask the researcher.",
    "Research": "Vienna has been Austria's capital since 1918.",
    "Decide": "Hand over to the writer.",
    "Write": "Vienna, capital since 1918.",
}


def _serve(tmp_path: Path, **kw) -> GatewayServer:
    opts = ServeOptions(port=0, runs=str(tmp_path / "runs"), **kw)
    server = build(opts, BackendCompleter(ScriptedBackend(rules=RULES), None, batch_window=0))
    start_in_thread(server)
    return server


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayServer]:
    server = _serve(tmp_path, agents="planner,researcher,writer")
    yield server
    server.shutdown()
    server.server_close()
    server.gateway.close()


def _provider(endpoint: str | None = None) -> TracerProvider:
    tp = TracerProvider()
    exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    return tp


def team(base_url: str, tp: TracerProvider) -> str:
    """A planner that uses a tool, asks a researcher through a tool (an agent as a tool) and hands
    over to a writer, each step a span as an OTel GenAI instrumentation would make it."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    tracer = tp.get_tracer("hand-made")

    def chat(agent: str, prompt: str, *, with_id: bool = True) -> str:
        with tracer.start_as_current_span(f"chat {agent}") as span:
            span.set_attribute("gen_ai.operation.name", "chat")
            span.set_attribute("gen_ai.request.model", agent)
            reply = client.chat.completions.create(
                model=agent, messages=[{"role": "user", "content": prompt}]
            )
            if with_id:  # the researcher's span leaves it out: joined by model and time
                span.set_attribute("gen_ai.response.id", reply.id)
            return reply.choices[0].message.content or ""

    def agent_span(name: str, **attrs: str):
        span = tracer.start_as_current_span(f"invoke_agent {name}")
        return span, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name, **attrs}

    def tool_span(name: str, call_id: str, **attrs: str):
        span = tracer.start_as_current_span(f"execute_tool {name}")
        return span, {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": '{"q": "capital of Austria"}',
            **attrs,
        }

    cm, attrs = agent_span("Planner")
    with cm as planner:
        planner.set_attributes(attrs)
        chat("planner", "Plan: what is the capital of Austria?")
        cm, attrs = tool_span("search", "call_1")
        with cm as s:
            s.set_attributes(attrs)
            s.set_attribute("gen_ai.tool.call.result", "Vienna")
        cm, attrs = tool_span(
            "ask_researcher",
            "call_2",
            **{"gen_ai.transfer.mode": "return_to_caller", "gen_ai.transfer.target.name": "Researcher"},
        )
        with cm as s:
            s.set_attributes(attrs)
            cm2, attrs2 = agent_span("Researcher")
            with cm2 as r:
                r.set_attributes(attrs2)
                facts = chat("researcher", "Research: since when?", with_id=False)
            s.set_attribute("gen_ai.tool.call.result", facts)
        with tracer.start_as_current_span("chat gpt-elsewhere") as other:  # a model the gateway never saw
            other.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-elsewhere"})
            other.set_attribute("gen_ai.usage.input_tokens", 7)
        chat("planner", f"Decide: {facts}")
        cm, attrs = tool_span(
            "transfer_to_writer",
            "call_3",
            **{"gen_ai.transfer.mode": "pass_control", "gen_ai.transfer.target.name": "Writer"},
        )
        with cm as s:
            s.set_attributes(attrs)
    # the writer's own span names its caller (gen_ai.caller.*), as a framework in another process would
    cm, attrs = agent_span("Writer", **{"gen_ai.caller.type": "agent", "gen_ai.caller.name": "Planner"})
    with cm as w:
        w.set_attributes(attrs)
        return chat("writer", f"Write: {facts}")


def test_hand_made_genai_spans_merge_into_the_run_as_tools_and_invocations(gateway):
    base = f"{gateway.url}/runs/r1/v1"
    tp = _provider(f"{base}/traces")  # the standard exporter, protobuf over HTTP
    try:
        answer = team(base, tp)
    finally:
        tp.shutdown()
    assert answer == RULES["Write"]
    tr = load_one(gateway.gateway.finish_run("r1"))  # validated
    ev = {e.id: e for e in tr.events}
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    merged = tr.metadata["gateway"]["otel"]
    # 11 spans: every LLM span but one joined to its call (3 by id, the researcher's by model and time)
    assert merged["spans"] == 11 and merged["joined"] == {"response_id": 3, "model_and_time": 1}
    assert merged["llm_not_joined"] == 1 and merged["tools"] == 3
    assert merged["agents"] == {"Planner": "planner", "Researcher": "researcher", "Writer": "writer"}
    # the calls are the gateway's own: one return each, none recorded again from a span
    returns = [e for e in tr.events if e.type == "return" and "call" in (e.attrs or {})]
    assert [e.agent for e in returns] == ["planner", "researcher", "planner", "writer"]
    assert all(e.attrs["completion_id"].startswith("chatcmpl-") for e in returns)
    p1, r1, p2, w1 = (e.id for e in returns)
    # the planner's tools, after the call that asked for them
    calls = {e.tool: e for e in tr.events if e.type == "tool_call"}
    results = {e.tool: e for e in tr.events if e.type == "tool_result"}
    assert set(calls) == set(results) == {"search", "ask_researcher", "transfer_to_writer"}
    assert all(e.agent == "planner" for e in [*calls.values(), *results.values()])
    assert (p1, calls["search"].id) in edges and (calls["search"].id, results["search"].id) in edges
    assert calls["search"].content == '{"q": "capital of Austria"}' and results["search"].content == "Vienna"
    # the researcher run as a tool: a delegation into its call, its answer back into the tool's result
    delegate = next(
        e for e in tr.events if e.type == "message" and (e.attrs or {}).get("kind") == "delegation"
    )
    assert (delegate.agent, delegate.to) == ("planner", "researcher")
    assert (calls["ask_researcher"].id, delegate.id) in edges and edges[(delegate.id, r1)] == "message"
    back = next(e for e in tr.events if e.type == "message" and (e.attrs or {}).get("kind") == "result")
    assert (back.agent, back.to) == ("researcher", "planner")
    assert (r1, back.id) in edges and (back.id, results["ask_researcher"].id) in edges
    assert (results["ask_researcher"].id, p2) in edges  # and the planner's next call comes after it
    # the handoff: once (the writer's gen_ai.caller.* says the same), into the writer's call, no way back
    handoffs = [e for e in tr.events if e.type == "message" and (e.attrs or {}).get("kind") == "handoff"]
    assert [(e.agent, e.to) for e in handoffs] == [("planner", "writer")]
    assert (calls["transfer_to_writer"].id, handoffs[0].id) in edges and edges[
        (handoffs[0].id, w1)
    ] == "message"
    assert not any(e.type == "message" and e.agent == "writer" for e in tr.events)
    # the call the gateway never saw: an llm_call of the planner
    other = [e for e in tr.events if (e.attrs or {}).get("kind") == "llm_call"]
    assert [(e.agent, e.model, e.tokens_in, e.attrs["joined"]) for e in other] == [
        ("planner", "gpt-elsewhere", 7, False)
    ]
    # every merged event is placed where its span says, inside the run
    assert all(ev[s].t <= ev[d].t for s, d in edges)


def _otlp_json(span_id: str = "00f067aa0ba902b7", **attrs: str) -> dict:
    """One ``execute_tool`` span in OTLP/JSON (hex ids, times as strings, as the spec writes them)."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "team"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                                "spanId": span_id,
                                "name": "execute_tool lookup",
                                "startTimeUnixNano": "1",
                                "endTimeUnixNano": "2",
                                "attributes": [
                                    {"key": k, "value": {"stringValue": v}}
                                    for k, v in {
                                        "gen_ai.operation.name": "execute_tool",
                                        "gen_ai.tool.name": "lookup",
                                        **attrs,
                                    }.items()
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }


def post(url: str, body: bytes, ctype: str = "application/json", **headers: str) -> httpx.Response:
    return httpx.post(url, content=body, headers={"Content-Type": ctype, **headers})


def test_otlp_json_and_gzip_are_read_and_a_closed_run_refuses_its_spans_in_otlp_shape(gateway):
    url = f"{gateway.url}/runs/j1/v1/traces"
    r = post(url, orjson.dumps(_otlp_json()))
    assert r.status_code == 200 and r.json() == {} and r.headers["Content-Type"] == "application/json"
    again = gzip.compress(orjson.dumps(_otlp_json("00f067aa0ba902b8")))
    assert post(url, again, **{"Content-Encoding": "gzip"}).status_code == 200
    tr = load_one(gateway.gateway.finish_run("j1"))  # a run of spans only: the tools of no agent's
    tools = [e for e in tr.events if e.type == "tool_call"]
    assert [(e.agent, e.tool) for e in tools] == [("orchestrator", "lookup")] * 2
    # the run has ended: its trace is closed, the spans are refused (and said so), not lost silently
    late = post(url, orjson.dumps(_otlp_json("00f067aa0ba902b9")))
    assert late.status_code == 200
    partial = late.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1" and "has ended" in partial["errorMessage"]


def test_the_standard_exporter_env_vars_name_the_run(gateway, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"{gateway.url}/runs/env1")  # + /v1/traces
    tp = _provider()
    with tp.get_tracer("t").start_as_current_span("execute_tool lookup") as s:
        s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"})
    tp.shutdown()
    assert len(gateway.gateway.runs["env1"].otel_spans) == 1


@pytest.mark.parametrize(
    ("body", "ctype", "headers", "status", "says"),
    [
        (b"\xff\xff\xff", "application/x-protobuf", {}, 400, "not an ExportTraceServiceRequest"),
        (b"{not json", "application/json", {}, 400, "not JSON"),
        (b"[]", "application/json", {}, 400, "ExportTraceServiceRequest"),
        (orjson.dumps(_otlp_json("")), "application/json", {}, 400, "spanId"),
        (b"{}", "text/plain", {}, 415, "Content-Type"),
        (b"{}", "application/json", {"Content-Encoding": "br"}, 415, "Content-Encoding"),
        (b"not gzip", "application/json", {"Content-Encoding": "gzip"}, 400, "not valid gzip"),
        (
            gzip.compress(b"{}" * 1000)[:20],
            "application/json",
            {"Content-Encoding": "gzip"},
            400,
            "cut short",
        ),
        (
            gzip.compress(b" " * (5 * 1024 * 1024)),
            "application/json",
            {"Content-Encoding": "gzip"},
            413,
            "inflates",
        ),
    ],
)
def test_a_malformed_export_is_refused_in_otlp_shape(gateway, body, ctype, headers, status, says):
    r = post(f"{gateway.url}/runs/bad/v1/traces", body, ctype, **headers)
    assert r.status_code == status
    if ctype == "application/x-protobuf":
        from google.rpc.status_pb2 import Status

        err = Status.FromString(r.content)
        assert err.code == 3 and says in err.message
    else:
        assert says in r.json()["message"]
    assert "bad" not in gateway.gateway.runs  # nothing kept, no run opened


def test_a_foreign_host_is_refused_before_the_body_is_read(gateway):
    r = post(f"{gateway.url}/runs/h1/v1/traces", orjson.dumps(_otlp_json()), Host="evil.example")
    assert r.status_code == 421 and "h1" not in gateway.gateway.runs


def test_without_content_the_tool_arguments_stay_out_of_the_trace(tmp_path):
    server = _serve(tmp_path, agents="planner", keep_content=False)
    try:
        url = f"{server.url}/runs/n1/v1/traces"
        secret = {"gen_ai.tool.call.arguments": '{"q": "the secret plan"}', "gen_ai.tool.call.result": "42"}
        assert post(url, orjson.dumps(_otlp_json(**secret))).status_code == 200
        path = server.gateway.finish_run("n1")
    finally:
        server.shutdown()
        server.server_close()
        server.gateway.close()
    text = Path(path).read_text()
    assert "secret plan" not in text and '"tool":"lookup"' in text.replace(" ", "")


# ---------------------------------------------------------------- a LangGraph team, OpenInference spans

FACTS = "Vienna has been the capital of Austria since 1918."
ESSAY = "Vienna: Austria's capital since 1918."


def upstream_reply(body: dict) -> dict:
    """A capable model behind --server: the researcher calls its tool, then answers from it; the
    writer writes from the researcher's answer."""
    model, messages = body["model"], body["messages"]
    if model == "researcher" and not any(m["role"] == "tool" for m in messages):
        call = {**tool_call("lookup", {"q": "Vienna"}), "id": "call_lookup_1"}
        return completion(model, {"role": "assistant", "content": None, "tool_calls": [call]})
    return completion(model, {"role": "assistant", "content": FACTS if model == "researcher" else ESSAY})


def langgraph_team(question: str, base_url: str) -> str:
    """``research`` (a ChatOpenAI with a tool, looped through a ToolNode) then ``write``."""
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def lookup(q: str) -> str:
        """Look a place up."""
        return "Vienna: capital of Austria (1918)."

    def llm(agent: str) -> ChatOpenAI:
        return ChatOpenAI(model=agent, base_url=base_url, api_key="unused", max_retries=0)

    researcher, writer = llm("researcher").bind_tools([lookup]), llm("writer")

    def research(state: MessagesState) -> dict:
        return {"messages": [researcher.invoke(state["messages"])]}

    def write(state: MessagesState) -> dict:
        facts = state["messages"][-1].content
        return {"messages": [writer.invoke([HumanMessage(f"Write one line from: {facts}")])]}

    graph = StateGraph(MessagesState)
    graph.add_node("research", research)
    graph.add_node("tools", ToolNode([lookup]))
    graph.add_node("write", write)
    graph.add_edge(START, "research")
    graph.add_conditional_edges("research", tools_condition, {"tools": "tools", END: "write"})
    graph.add_edge("tools", "research")
    graph.add_edge("write", END)
    out = graph.compile().invoke({"messages": [HumanMessage(question)]})
    return str(out["messages"][-1].content)


@pytest.mark.parametrize("hide_outputs", [False, True])
def test_a_langgraph_team_instrumented_with_openinference_merges_its_tool_into_the_run(
    tmp_path, hide_outputs
):
    """Hand-checked: research asks for ``lookup`` (call 1), the ToolNode runs it, research answers
    from it (call 2), write writes from that (call 3). Hiding OpenInference's outputs (no completion
    id, no ToolMessage in the spans) leaves the joins to model, time and tool name."""
    pytest.importorskip("langgraph")
    instrumentation = pytest.importorskip("openinference.instrumentation.langchain")
    from openinference.instrumentation import TraceConfig

    upstream = scripted_server(upstream_reply, [])
    opts = ServeOptions(
        port=0,
        runs=str(tmp_path / "runs"),
        agents="researcher,writer",
        server=f"http://127.0.0.1:{upstream.server_address[1]}",
    )
    server = build(opts)
    start_in_thread(server)
    base = f"{server.url}/runs/lg1/v1"
    tp = _provider(f"{base}/traces")
    instrumentor = instrumentation.LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=tp, config=TraceConfig(hide_outputs=hide_outputs))
    try:
        assert langgraph_team("What is the capital of Austria?", base) == ESSAY
        tp.force_flush()
        path = server.gateway.finish_run("lg1")
    finally:
        instrumentor.uninstrument()
        tp.shutdown()
        server.shutdown()
        server.server_close()
        server.gateway.close()
        upstream.shutdown()
        upstream.server_close()
    from orchestrace.cli import main

    with pytest.raises(SystemExit) as validated:
        main(["validate", path])
    assert validated.value.code == 0
    tr = load_one(path)
    edges = {(e.src, e.dst): e.type for e in tr.edges}
    merged = tr.metadata["gateway"]["otel"]
    # the graph, its 3 nodes' runs (research twice), 3 LLM spans, the tool: all joined, none twice
    how = "model_and_time" if hide_outputs else "response_id"
    assert merged["joined"][how] == 3 and merged["llm_not_joined"] == 0
    assert merged["agents"] == {"research": "researcher", "write": "writer"}  # "tools" is no agent
    returns = [e for e in tr.events if e.type == "return"]
    assert [e.agent for e in returns] == ["researcher", "researcher", "writer"]
    asked, answered, wrote = (e.id for e in returns)
    assert returns[0].attrs["tool_calls"] == ["lookup"]
    # the tool is the researcher's: after the call that asked for it, before the call that read it
    (call,) = [e for e in tr.events if e.type == "tool_call"]
    (result,) = [e for e in tr.events if e.type == "tool_result"]
    assert (call.agent, call.tool, call.call_id) == ("researcher", "lookup", "call_lookup_1")
    assert (result.agent, result.call_id) == ("researcher", "call_lookup_1")
    assert (asked, call.id) in edges and (call.id, result.id) in edges and (result.id, answered) in edges
    # research -> write: the data flow the gateway found in the writer's prompt
    assert edges[(answered, wrote)] == "message"
    assert not [e for e in tr.events if e.type == "message" and e.agent != "orchestrator"]


def test_without_a_run_in_the_path_the_header_names_it(gateway):
    r = post(f"{gateway.url}/v1/traces", orjson.dumps(_otlp_json()), **{"X-Orchestrace-Run": "hdr1"})
    assert r.status_code == 200 and len(gateway.gateway.runs["hdr1"].otel_spans) == 1


def _span(span_id: str, parent: str, name: str, start: str, end: str, **attrs) -> dict:
    values = {k: {"intValue": v} if isinstance(v, int) else {"stringValue": v} for k, v in attrs.items()}
    return {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": [{"key": k, "value": v} for k, v in values.items()],
    }


def test_hostile_spans_are_merged_into_a_valid_trace_or_counted(gateway):
    """Parent cycles, a span its own parent, times out of range or reversed, an agent that invokes
    itself or hands over to itself, negative token counts: the run's trace still validates."""
    import openai

    base = f"{gateway.url}/runs/x1/v1"
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
    client.chat.completions.create(model="planner", messages=[{"role": "user", "content": "Plan: go"}])
    now = str(time.time_ns())
    spans = [
        _span("a1", "a2", "invoke_agent planner", now, now, **{"gen_ai.agent.name": "planner"}),
        _span("a2", "a1", "execute_tool t", now, now, **{"gen_ai.transfer.target.name": "planner"}),
        _span(
            "a3",
            "a3",
            "invoke_agent writer",
            "-5",
            "99999999999999999999999",
            **{"gen_ai.caller.name": "writer"},
        ),
        _span(
            "a4",
            "",
            "chat writer",
            now,
            "1",
            **{"gen_ai.request.model": "writer", "gen_ai.usage.input_tokens": -3},
        ),
        _span(
            "a5",
            "a4",
            "execute_tool x",
            "1",
            now,
            **{"gen_ai.transfer.mode": "pass_control", "gen_ai.transfer.target.name": "ghost"},
        ),
        _span("a6", "", "GET /health", now, now),
    ]
    export = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    assert post(f"{base}/traces", orjson.dumps(export)).json() == {}
    tr = load_one(gateway.gateway.finish_run("x1"))  # validated: no cycle, nothing back in time
    merged = tr.metadata["gateway"]["otel"]
    assert "error" not in merged and merged["spans"] == 6 and merged["other_spans"] == 1
    # the tool in the cycle is the planner's; the one under a model span of no agent the root's
    assert {e.agent for e in tr.events if e.type == "tool_call"} == {"planner", "orchestrator"}
    assert not [e for e in tr.events if e.type == "message" and e.agent == e.to]  # no agent calls itself
    assert "ghost" in {e.to for e in tr.events if e.type == "spawn"}  # handed over to, never seen


# ---------------------------------------------------------------- in the trainer's process

TRAINER_TP = TracerProvider()


def traced_chain(question: str, base_url: str) -> str | None:
    """``gateway_teams.chain`` inside an agent span, then a tool: spans on a provider whose
    processors include the run processor, as the trainer adds it to the global provider."""
    import gateway_teams

    tracer = TRAINER_TP.get_tracer("team")
    with tracer.start_as_current_span("invoke_agent team") as s:
        s.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "team"})
        answer = gateway_teams.chain(question, base_url)
        with tracer.start_as_current_span("execute_tool lookup") as t:
            t.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup"})
    return answer


def test_a_program_in_the_trainers_process_sends_each_run_its_own_spans(tmp_path, monkeypatch):
    from opentelemetry import trace

    from orchestrace.learn.gateway import otel_run
    from orchestrace.learn.gateway.service import CallDefaults, Team
    from orchestrace.learn.gateway.train import GatewayRollouts, ProgramStep
    from orchestrace.learn.team.config import TeamConfig, reward_spec, split

    # the trainer adds its processor to the global SDK provider (here the test's own, not the
    # process's global one, which other tests must not inherit)
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: TRAINER_TP)
    monkeypatch.setattr(otel_run, "_processor", None)
    backend = ScriptedBackend(rules={"teammate answered": "France", "Answer with": "france"})
    remote = GatewayRollouts(
        BackendCompleter(backend, None, batch_window=0),
        Team("agent", {"solver": "solver", "checker": "checker"}),
        traced_chain,
        defaults=CallDefaults(max_tokens=8),
        timeout=30.0,
    )
    cfg = TeamConfig(program="x:traced_chain", group=3, questions=1, train_pool=2, heldout=1)
    step = ProgramStep(cfg, None, None, None, reward_spec(cfg), remote=remote)  # type: ignore[arg-type]
    step.train_ids, step.heldout_ids = split(cfg)
    try:
        kept = step.collect(1, None, tmp_path / "iter-001")  # 3 runs at once, a thread each
    finally:
        remote.close()
    assert len(kept) == 3
    for path in kept:
        tr = load_one(path)
        merged = tr.metadata["gateway"]["otel"]
        assert merged["spans"] == 2 and merged["tools"] == 1  # its own two spans, no other run's
        (call,) = [e for e in tr.events if e.type == "tool_call"]
        checker = [e for e in tr.events if e.type == "return" and e.agent == "checker"][-1]
        assert call.tool == "lookup" and call.t >= checker.t


def test_agents_only_spans_know_are_spawned_by_their_caller_and_a_deep_nest_stays_valid(gateway):
    """A helper agent that makes no gateway call, invoked inside the planner's span: spawned by the
    planner, returns to it, and is despawned before it (the other order made the planner act after
    its own end). Then 300 agents each inside the last: merged (the deepest as roots), valid."""
    import openai

    base = f"{gateway.url}/runs/n2/v1"
    client = openai.OpenAI(base_url=base, api_key="unused", max_retries=0)
    client.chat.completions.create(model="planner", messages=[{"role": "user", "content": "Plan: go"}])
    now = time.time_ns()
    agent = {"gen_ai.operation.name": "invoke_agent"}
    spans = [
        _span(
            "p1",
            "",
            "invoke_agent planner",
            str(now),
            str(now + 9),
            **agent,
            **{"gen_ai.agent.name": "planner"},
        ),
        _span(
            "h1",
            "p1",
            "invoke_agent helper",
            str(now + 1),
            str(now + 8),
            **agent,
            **{"gen_ai.agent.name": "helper"},
        ),
        _span("t1", "h1", "execute_tool grep", str(now + 2), str(now + 3), **{"gen_ai.tool.name": "grep"}),
    ]
    spans += [
        _span(f"d{i}", f"d{i - 1}" if i else "", f"invoke_agent deep{i}", str(now + 10), str(now + 11))
        for i in range(300)
    ]
    export = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    assert post(f"{base}/traces", orjson.dumps(export)).json() == {}
    tr = load_one(gateway.gateway.finish_run("n2"))  # validated
    spawn = next(e for e in tr.events if e.type == "spawn" and e.to == "helper")
    (call,) = [e for e in tr.events if e.type == "tool_call"]
    back = next(e for e in tr.events if e.type == "return" and e.agent == "helper")
    assert (spawn.agent, call.agent, back.to) == ("planner", "helper", "planner")
    despawns = [e.to for e in tr.events if e.type == "despawn"]
    assert despawns.index("helper") < despawns.index("planner")
    merged = tr.metadata["gateway"]["otel"]
    assert "error" not in merged and merged["too_deep"] > 0


def test_a_run_keeps_a_bounded_number_and_size_of_spans(gateway, monkeypatch):
    from orchestrace.learn.gateway import service

    monkeypatch.setattr(service, "MAX_SPANS_PER_RUN", 2)
    url = f"{gateway.url}/runs/b1/v1/traces"
    first = post(url, orjson.dumps(_otlp_json("00f067aa0ba902b1")))
    again = post(url, orjson.dumps(_otlp_json("00f067aa0ba902b1")))  # the same span: kept once
    assert first.json() == again.json() == {}
    two = {
        "resourceSpans": [{"scopeSpans": [{"spans": [_span(f"c{i}", "", "x", "1", "2") for i in range(2)]}]}]
    }
    assert post(url, orjson.dumps(two)).json()["partialSuccess"]["rejectedSpans"] == "1"
    monkeypatch.setattr(service, "MAX_SPANS_PER_RUN", 100)
    monkeypatch.setattr(service, "MAX_SPAN_BYTES_PER_RUN", 10_000)
    big = _otlp_json("00f067aa0ba902b2", **{"input.value": "x" * 20_000})
    refused = post(url, orjson.dumps(big)).json()["partialSuccess"]
    assert refused["rejectedSpans"] == "1" and "MiB of attributes" in refused["errorMessage"]
    assert len(gateway.gateway.runs["b1"].otel_spans) == 2


def test_a_refused_host_closes_the_connection_so_its_unread_body_is_no_next_request(gateway):
    """The 421 is sent before the body is read; kept alive, the connection's next bytes were that
    body, read as a request line (a 400 nobody asked for, and a BrokenPipe traceback on stderr)."""
    import socket

    host, port = gateway.server_address[:2]
    body = orjson.dumps(_otlp_json())
    head = f"POST /runs/h2/v1/traces HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(head.encode() + body)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
    assert got.startswith(b"HTTP/1.1 421") and got.count(b"HTTP/1.1") == 1  # then closed


def test_a_client_gone_mid_answer_prints_no_traceback(gateway, capsys):
    try:
        raise BrokenPipeError(32, "Broken pipe")
    except BrokenPipeError:
        gateway.handle_error(None, ("127.0.0.1", 1))
    try:
        raise ValueError("the prompt was: secret")
    except ValueError:
        gateway.handle_error(None, ("127.0.0.1", 1))
    err = capsys.readouterr().err
    assert "Traceback" not in err and "secret" not in err
    assert err.count("\n") == 1 and "internal error ValueError" in err


def test_spans_sent_with_no_run_go_to_the_run_that_answered_their_trace(gateway, capsys):
    """One provider, one endpoint without a run (as a program running many runs has): each OTel
    trace joins the run whose calls its LLM spans report; a trace that names none waits, and is
    said to be lost when the server stops."""
    tp = _provider(f"{gateway.url}/v1/traces")
    try:
        team(f"{gateway.url}/runs/u1/v1", tp)
        team(f"{gateway.url}/runs/u2/v1", tp)
        with tp.get_tracer("t").start_as_current_span("execute_tool lonely") as s:
            s.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lonely"})
    finally:
        tp.shutdown()
    for rid in ("u1", "u2"):
        tr = load_one(gateway.gateway.finish_run(rid))
        merged = tr.metadata["gateway"]["otel"]
        assert merged["spans"] == 11 and merged["joined"] == {"response_id": 3, "model_and_time": 1}
        assert sorted(e.tool for e in tr.events if e.type == "tool_call") == [
            "ask_researcher",
            "search",
            "transfer_to_writer",
        ]
    gateway.gateway.close()
    assert "1 OpenTelemetry span(s) of 1 trace(s) named no run" in capsys.readouterr().err


def test_spans_waiting_for_a_run_are_bounded_too(gateway, monkeypatch):
    from orchestrace.learn.gateway import service

    monkeypatch.setattr(service, "MAX_SPAN_BYTES_PER_RUN", 10_000)
    url = f"{gateway.url}/v1/traces"
    small = post(url, orjson.dumps(_otlp_json("00f067aa0ba902c1")))
    big = post(url, orjson.dumps(_otlp_json("00f067aa0ba902c2", **{"input.value": "x" * 20_000})))
    assert small.json() == {} and big.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert [len(v) for v in gateway.gateway.waiting.values()] == [1]
