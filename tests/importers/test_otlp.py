"""OTel GenAI: spans recorded by the OpenTelemetry SDK import; exported spans parse as OTLP."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from orchestrace import importers
from orchestrace.core.errors import OrchestraceError
from orchestrace.core.model import event_to_dict
from orchestrace.core.validate import validate_trace
from orchestrace.export import get_exporter
from orchestrace.export.otlp import export_otlp, iter_otlp
from orchestrace.importers import claude_code, otlp

if not os.environ.get("CI"):  # under CI it must run (requirements.txt pins opentelemetry-sdk)
    pytest.importorskip(
        "opentelemetry.sdk.trace", reason="opentelemetry-sdk not installed (requirements.txt)"
    )
import opentelemetry.sdk.trace as sdk  # noqa: E402
from google.protobuf.json_format import MessageToDict, ParseDict  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import Status, StatusCode  # noqa: E402


def _errors(tr) -> list[str]:
    return [str(f) for f in validate_trace(tr) if f.severity == "error"]


def _record_genai_run() -> list:
    """A planner that calls a model, then delegates to a coder whose tool call fails."""
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with tracer.start_as_current_span(
        "invoke_agent planner", attributes={**agent, "gen_ai.agent.name": "planner"}
    ):
        chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}
        with tracer.start_as_current_span(
            "chat gpt-4o",
            attributes={**chat, "gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20},
        ):
            pass
        with tracer.start_as_current_span(
            "invoke_agent coder", attributes={**agent, "gen_ai.agent.name": "coder"}
        ):
            with tracer.start_as_current_span(
                "chat gpt-4o",
                attributes={**chat, "gen_ai.usage.input_tokens": 7, "gen_ai.usage.output_tokens": 3},
            ):
                pass
            tool = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "run_tests",
                "gen_ai.tool.call.id": "call_1",
            }
            with tracer.start_as_current_span("execute_tool run_tests", attributes=tool) as s:
                s.set_status(Status(StatusCode.ERROR, "2 failed"))
        with tracer.start_as_current_span("GET /health"):  # not a GenAI span
            pass
    provider.shutdown()
    return exporter.get_finished_spans()


def _hex_ids(o):
    """Proto3 JSON (base64 ids) -> OTLP/JSON (hex ids)."""
    if isinstance(o, dict):
        return {
            k: (
                base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") and v else _hex_ids(v)
            )
            for k, v in o.items()
        }
    if isinstance(o, list):
        return [_hex_ids(x) for x in o]
    return o


def _b64_ids(o):
    if isinstance(o, dict):
        return {
            k: (
                base64.b64encode(bytes.fromhex(v)).decode()
                if k in ("traceId", "spanId", "parentSpanId")
                else _b64_ids(v)
            )
            for k, v in o.items()
        }
    if isinstance(o, list):
        return [_b64_ids(x) for x in o]
    return o


@pytest.mark.parametrize("encoding", ["hex", "base64"])
def test_import_sdk_spans(tmp_path: Path, encoding: str) -> None:
    req = MessageToDict(encode_spans(_record_genai_run()))
    f = tmp_path / "spans.json"
    f.write_text(json.dumps(_hex_ids(req) if encoding == "hex" else req))
    assert importers.detect(f) == "otel"
    (tr,) = list(otlp.load(f))
    assert _errors(tr) == []
    kinds = [(e.type, e.agent, e.to) for e in tr.events]
    assert kinds == [
        ("orchestrator_decision", "planner", None),
        ("spawn", "planner", "coder"),
        ("orchestrator_decision", "coder", None),
        ("tool_call", "coder", None),
        ("tool_result", "coder", None),
        ("return", "coder", "planner"),
    ]
    assert (
        tr.events[4].status == "error"
        and tr.events[4].call_id == "call_1"
        and tr.events[4].tool == "run_tests"
    )
    assert (tr.costs["tokens_in"], tr.costs["tokens_out"]) == (107, 23)
    assert tr.events[0].model == "gpt-4o"
    assert tr.metadata["import"]["unknown_records"] == {"span GET /health": 1}


def _check_otlp_request(d: dict) -> int:
    """Parse with the OTLP protobuf schema; check ids and parent links. Returns spans."""
    msg = ParseDict(_b64_ids(d), ExportTraceServiceRequest())
    n = 0
    for rs in msg.resource_spans:
        for ss in rs.scope_spans:
            ids = {s.span_id for s in ss.spans}
            for s in ss.spans:
                n += 1
                assert len(s.trace_id) == 16 and len(s.span_id) == 8
                assert not s.parent_span_id or s.parent_span_id in ids
                assert s.end_time_unix_nano >= s.start_time_unix_nano > 1_600_000_000 * 10**9
    return n


def test_export_parses_as_otlp_and_round_trips(data: Path, tmp_path: Path) -> None:
    src = (
        data
        / "claude-code/test/test_data/real_projects/-experiments-worktrees/ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    )
    tr = next(claude_code.load(src, keep_content=True))
    out = tmp_path / "spans.jsonl"
    n = get_exporter("otlp")([tr], str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 1
    req = json.loads(lines[0])
    # tool calls (and spawns) with token usage get the model call behind them as their own LLM span
    llm_calls = sum(e.type in ("tool_call", "spawn") and e.tokens > 0 for e in tr.events)
    assert llm_calls > 0
    assert _check_otlp_request(req) == n == 1 + len(tr.agents()) + len(tr.events) + llm_calls
    spans = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    names = {s["name"].split(" ")[0] for s in spans}
    assert {"invoke_agent", "execute_tool", "chat", "spawn", "return"} <= names
    # privacy: content not exported unless asked
    assert 'content":' not in lines[0].replace("content_ref", "")
    (back,) = list(otlp.load(out))
    assert _errors(back) == []
    assert back.trace_id == tr.trace_id and back.costs == tr.costs
    strip = [{k: v for k, v in event_to_dict(e).items() if k != "content"} for e in tr.events]
    assert [event_to_dict(e) for e in back.events] == strip
    assert sorted(back.edges, key=repr) == sorted(tr.edges, key=repr)
    # the coder's agent span hangs under the spawn span
    by_id = {s["spanId"]: s for s in spans}
    alice = next(s for s in spans if s["name"] == "invoke_agent alice")
    assert by_id[alice["parentSpanId"]]["name"] == "spawn main"


def test_export_many_traces_one_request(data: Path, tmp_path: Path) -> None:
    files = sorted((data / "who-and-when/Who&When/Algorithm-Generated").glob("*.json"))[:5]
    traces = [next(importers.load(f)) for f in files]
    out = tmp_path / "all.otlp.json"
    n = export_otlp(traces, str(out))
    req = json.loads(out.read_text())
    assert len(req["resourceSpans"]) == 5
    assert _check_otlp_request(req) == n
    back = list(otlp.load(out))
    assert [t.trace_id for t in back] == [t.trace_id for t in traces]
    assert all(_errors(t) == [] for t in back)


def test_openinference_spans(tmp_path: Path) -> None:
    """Spans as Phoenix/OpenInference instrumentations write them (no gen_ai.* keys)."""
    exporter = InMemorySpanExporter()
    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("oi")
    with tracer.start_as_current_span("Supervisor", attributes={"openinference.span.kind": "AGENT"}):
        llm = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "m1",
            "llm.token_count.prompt": 40,
            "llm.token_count.completion": 9,
        }
        with tracer.start_as_current_span("ChatModel", attributes=llm):
            pass
        with tracer.start_as_current_span("Researcher", attributes={"openinference.span.kind": "AGENT"}):
            with tracer.start_as_current_span(
                "search", attributes={"openinference.span.kind": "TOOL", "tool.name": "search"}
            ):
                pass
    provider.shutdown()
    f = tmp_path / "oi.json"
    f.write_text(json.dumps(_hex_ids(MessageToDict(encode_spans(exporter.get_finished_spans())))))
    (tr,) = list(otlp.load(f))
    assert _errors(tr) == []
    assert [(e.type, e.agent, e.to, e.tool) for e in tr.events] == [
        ("orchestrator_decision", "Supervisor", None, None),
        ("spawn", "Supervisor", "Researcher", None),
        ("tool_call", "Researcher", None, "search"),
        ("tool_result", "Researcher", None, "search"),
        ("return", "Researcher", "Supervisor", None),
    ]
    assert (tr.costs["tokens_in"], tr.costs["tokens_out"]) == (40, 9) and tr.events[0].model == "m1"


def test_exported_spans_without_orchestrace_attributes_still_map(data: Path, tmp_path: Path) -> None:
    """A backend that keeps only standard attributes: the GenAI mapping alone rebuilds the shape."""
    src = (
        data
        / "claude-code/test/test_data/real_projects/-src-experiments-claude_p/29ccd257-68b1-427f-ae5f-6524b7cb6f20.jsonl"
    )
    tr = next(claude_code.load(src))
    req = next(iter_otlp([tr]))
    for rs in req["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                s["attributes"] = [a for a in s["attributes"] if not a["key"].startswith("orchestrace.")]
    f = tmp_path / "stripped.json"
    f.write_text(json.dumps(req))
    (back,) = list(otlp.load(f))
    assert _errors(back) == []
    count = lambda t, ty: sum(e.type == ty for e in t.events)  # noqa: E731
    assert count(back, "tool_call") == count(tr, "tool_call") == 24
    assert count(back, "spawn") == count(tr, "spawn") == 1
    assert back.costs["tokens"] == tr.costs["tokens"]


def test_export_posts_to_an_otlp_http_endpoint(data: Path) -> None:
    """A real HTTP server on 127.0.0.1 playing an OTLP/HTTP receiver: every body parses as OTLP."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    received: list[tuple[dict, dict]] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers["Content-Type"] == "application/x-protobuf":
                msg = ExportTraceServiceRequest()
                msg.ParseFromString(raw)
                body = _hex_ids(MessageToDict(msg))
            else:
                body = json.loads(raw)
            received.append((body, dict(self.headers)))
            ok = self.path == "/v1/traces"
            self.send_response(200 if ok else 400)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        traces = [next(importers.load(f)) for f in sorted((data / "chatdev/WareHouse").glob("*/*.log"))[:2]]
        url = f"http://127.0.0.1:{server.server_port}/v1/traces"
        n = export_otlp(traces, url, headers="Authorization=Basic abc", epoch=1.7e9)
        assert len(received) == 2 and sum(_check_otlp_request(b) for b, _ in received) == n
        assert received[0][1]["Authorization"] == "Basic abc"
        assert received[0][1]["Content-Type"] == "application/x-protobuf"  # the OTLP default
        assert export_otlp(traces, url, encoding="json", epoch=1.7e9) == n
        assert received[2][1]["Content-Type"] == "application/json"
        # the protobuf body decodes to the very message the JSON body describes
        as_msg = [ParseDict(_b64_ids(b), ExportTraceServiceRequest()) for b, _ in received]
        assert as_msg[0] == as_msg[2] and as_msg[1] == as_msg[3] and as_msg[0] != as_msg[1]
        with pytest.raises(OrchestraceError, match="encoding must be one of"):
            export_otlp(traces, url, encoding="xml")
        with pytest.raises(OrchestraceError, match="HTTP 400"):
            export_otlp(traces[:1], f"http://127.0.0.1:{server.server_port}/wrong")
    finally:
        server.shutdown()
    with pytest.raises(OrchestraceError, match="cannot reach"):
        export_otlp(traces[:1], f"http://127.0.0.1:{server.server_port}/v1/traces", timeout=2)


def test_genai_and_openinference_attributes_on_a_real_codex_session(data: Path) -> None:
    """Tokens only on LLM spans (sum = the session's tokens); text in the panes Phoenix reads."""
    from orchestrace.importers import codex

    tr = next(codex.load(next((data / "codex").glob("rollout-*.jsonl")), keep_content=True))
    req = next(iter_otlp([tr], include_content=True, project="mine"))
    resource = {a["key"]: a["value"] for a in req["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["openinference.project.name"] == resource["service.name"] == {"stringValue": "mine"}
    spans = req["resourceSpans"][0]["scopeSpans"][0]["spans"]
    attrs = [{a["key"]: next(iter(a["value"].values())) for a in s["attributes"]} for s in spans]
    kind = [a.get("openinference.span.kind") for a in attrs]
    assert all(k in ("CHAIN", "AGENT", "TOOL", "LLM") for k in kind)  # the root included
    usage = [a for a in attrs if "gen_ai.usage.input_tokens" in a or "llm.token_count.total" in a]
    assert all(a["openinference.span.kind"] == "LLM" for a in usage)
    assert sum(int(a["llm.token_count.total"]) for a in usage) == tr.costs["tokens"]
    assert all(a["gen_ai.provider.name"] == "openai" and a["gen_ai.response.model"] for a in usage)
    assert all(a["gen_ai.conversation.id"] == tr.trace_id for a in attrs)
    tools = [a for a in attrs if a.get("openinference.span.kind") == "TOOL"]
    calls = {e.call_id: e for e in tr.events if e.type == "tool_call"}
    results = {e.call_id: e for e in tr.events if e.type == "tool_result"}
    for a in tools:
        call_id = a["gen_ai.tool.call.id"]
        assert a["input.value"] == a["gen_ai.tool.call.arguments"] == calls[call_id].content
        if call_id in results and results[call_id].content:
            assert a["output.value"] == results[call_id].content
    llm = [a for a in usage if "llm.input_messages.0.message.content" in a]
    assert llm and all(a["input.value"] == a["llm.input_messages.0.message.content"] for a in llm)
    assert json.loads(llm[0]["gen_ai.input.messages"])[0]["parts"][0]["content"] == llm[0]["input.value"]
    # without content, no text at all
    bare = json.dumps(next(iter_otlp([tr])))
    assert "input.value" not in bare and "gen_ai.input.messages" not in bare


def test_binary_protobuf_file(data: Path, tmp_path: Path) -> None:
    files = sorted((data / "who-and-when/Who&When/Algorithm-Generated").glob("*.json"))[:3]
    traces = [next(importers.load(f)) for f in files]
    n = export_otlp(traces, str(tmp_path / "spans.pb"), epoch=1.7e9)
    msg = ExportTraceServiceRequest()
    msg.ParseFromString((tmp_path / "spans.pb").read_bytes())
    assert len(msg.resource_spans) == 3 and _check_otlp_request(_hex_ids(MessageToDict(msg))) == n
    export_otlp(traces, str(tmp_path / "spans.json"), epoch=1.7e9)
    as_json = ParseDict(
        _b64_ids(json.loads((tmp_path / "spans.json").read_text())), ExportTraceServiceRequest()
    )
    assert as_json == msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.json", "spans.pb"]  # no .part left


def test_export_over_otlp_grpc(data: Path) -> None:
    """A real gRPC server on 127.0.0.1 with the official OTLP TraceService: every call decodes."""
    from concurrent import futures

    if not os.environ.get("CI"):  # under CI it must run (requirements-test.txt installs grpcio)
        pytest.importorskip("grpc", reason="grpcio not installed (OTLP/gRPC is optional)")
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    received: list[tuple[ExportTraceServiceRequest, dict]] = []

    class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802
            meta = dict(context.invocation_metadata())
            if meta.get("authorization") != "Bearer t":
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad token")
            received.append((request, meta))
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Receiver(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        traces = [next(importers.load(f)) for f in sorted((data / "chatdev/WareHouse").glob("*/*.log"))[:2]]
        url = f"grpc://127.0.0.1:{port}"
        n = export_otlp(traces, url, headers="Authorization=Bearer t", epoch=1.7e9)
        assert (
            len(received) == 2
            and sum(_check_otlp_request(_hex_ids(MessageToDict(m))) for m, _ in received) == n
        )
        want = [ParseDict(_b64_ids(r), ExportTraceServiceRequest()) for r in iter_otlp(traces, epoch=1.7e9)]
        assert [m for m, _ in received] == want
        with pytest.raises(OrchestraceError, match="UNAUTHENTICATED bad token"):
            export_otlp(traces[:1], url, headers="Authorization=Bearer wrong")
    finally:
        server.stop(None)
    with pytest.raises(OrchestraceError, match="UNAVAILABLE"):
        export_otlp(traces[:1], url, timeout=2)
