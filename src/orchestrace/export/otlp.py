"""Traces as OpenTelemetry spans, OTLP/HTTP protobuf or OTLP/JSON (Phoenix, Jaeger, Langfuse, Collector).

Layout of one trace (one OTel trace id, derived from ``trace_id``):

- a root span ``orchestrace <task_id>`` holding the trace-level fields (rewards, costs, metrics,
  metadata) as ``orchestrace.*`` attributes;
- per agent an ``invoke_agent <agent>`` span (GenAI semantic conventions) covering its events,
  child of the span of the event that spawned it, else of the root;
- per event a span under its agent's span: ``execute_tool <tool>`` for tool calls (lasting until
  the matching result), ``chat <model>`` for events with token usage, otherwise
  ``<type> <agent>``; ``gen_ai.*`` attributes carry provider, model, tokens, tool name and call id;
- token usage sits on LLM spans only: a tool call (or spawn) with usage gets the model call
  behind it as a sibling ``chat <model>`` span, so Phoenix's token totals count it;
- every dependency edge as a span link (``orchestrace.edge.type``) on its destination span.

OpenInference kinds (``openinference.span.kind`` AGENT/TOOL/LLM/CHAIN, ``llm.token_count.*``)
are set as well, so Phoenix shows agents, tools and model calls without a mapping step. With
content kept, text goes into ``input.value``/``output.value`` and the GenAI message attributes
(docs/importers.md lists every attribute written).

Each event span also carries the event itself as JSON (``orchestrace.event``) so that importing
the file again gives back the same events and edges. Content is left out unless
``include_content=True`` (``content_ref`` stays). Ids follow OTLP/JSON: lowercase hex,
int64 values as decimal strings, enums as integers; :func:`to_protobuf` turns a request into
the official ``opentelemetry-proto`` message.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from typing import Any

import orjson

from ..core.errors import BadInput
from ..core.io import atomic_output
from ..core.model import Event, Trace, event_to_dict, trace_to_dict
from .context import event_prompts, task_text

SCOPE = {"name": "orchestrace", "version": "0.1.0"}
SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_OK, STATUS_ERROR = 1, 2
_ANSWER_TYPES = ("return", "aggregate", "message")


def _hex(seed: str, nbytes: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[: 2 * nbytes]


def _value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list | tuple) and all(isinstance(x, str | int | float | bool) for x in v):
        return {"arrayValue": {"values": [_value(x) for x in v]}}
    return {"stringValue": orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()}


def _attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _value(v)} for k, v in d.items() if v is not None]


def _t0_unix(meta: dict[str, Any]) -> float | None:
    """``metadata.t0_unix`` when it is a finite number; metadata is free-form, and a string
    there made the export fail (TypeError): another type reads as absent."""
    v = meta.get("t0_unix")
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def _ns(seconds: float, what: str) -> str:
    """OTLP times are unsigned 64-bit nanoseconds since 1970 (up to the year 2554). A valid trace
    may end later (t_end 1e308): said so (OT416), where the export met an internal error."""
    ns = seconds * 1e9
    if not 0 <= ns < 2**64:
        raise BadInput(
            "OT416",
            f"{what}: time {seconds:g} s since 1970 is outside OTLP's unsigned 64-bit nanoseconds "
            "(1970 to 2554)",
        )
    return str(int(round(ns)))


_PROVIDER_BY_PREFIX = (
    (("gpt", "o1", "o3", "o4", "codex", "text-", "davinci"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "gcp.gemini"),
    (("mistral", "codestral", "magistral"), "mistral_ai"),
    (("deepseek",), "deepseek"),
    (("grok",), "x_ai"),
)
_PROVIDER_BY_SYSTEM = {"codex": "openai", "claude-code": "anthropic", "gemini-cli": "gcp.gemini"}


def provider_of(model: str | None, system: str | None) -> str | None:
    """``gen_ai.provider.name`` from the model name, else from the recording harness; None if unknown."""
    m = (model or "").lower().rsplit("/", 1)[-1]
    for prefixes, name in _PROVIDER_BY_PREFIX:
        if m.startswith(prefixes):
            return name
    return _PROVIDER_BY_SYSTEM.get(system or "")


def _messages(role: str, text: str) -> str:
    """One GenAI semconv message list (``gen_ai.input.messages`` / ``gen_ai.output.messages``)."""
    return orjson.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}]).decode()


def _llm_attrs(e: Event, provider: str | None, prompt: str | None) -> dict[str, Any]:
    """GenAI + OpenInference attributes of the model call that produced ``e`` (tokens live here)."""
    total = (e.tokens_in or 0) + (e.tokens_out or 0)
    a: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": e.model,
        "gen_ai.response.model": e.model,
        "gen_ai.usage.input_tokens": e.tokens_in,
        "gen_ai.usage.output_tokens": e.tokens_out,
        "openinference.span.kind": "LLM",
        "llm.provider": provider,
        "llm.model_name": e.model,
        "llm.token_count.prompt": e.tokens_in,
        "llm.token_count.completion": e.tokens_out,
        "llm.token_count.total": total,
    }
    if (e.attrs or {}).get("truncated"):  # the runtime's mark of a call cut off by max_tokens
        a["gen_ai.response.finish_reasons"] = ["length"]
    if prompt is not None:
        a.update(_io(prompt, e.content))
        a["gen_ai.input.messages"] = _messages("user", prompt)
        a["llm.input_messages.0.message.role"] = "user"
        a["llm.input_messages.0.message.content"] = prompt
        if e.content is not None:
            a["gen_ai.output.messages"] = _messages("assistant", e.content)
            a["llm.output_messages.0.message.role"] = "assistant"
            a["llm.output_messages.0.message.content"] = e.content
    return a


def _io(inp: str | None, out: str | None) -> dict[str, Any]:
    """OpenInference ``input.value`` / ``output.value`` (Phoenix's input and output panes)."""
    a: dict[str, Any] = {}
    if inp is not None:
        a["input.value"], a["input.mime_type"] = inp, "text/plain"
    if out is not None:
        a["output.value"], a["output.mime_type"] = out, "text/plain"
    return a


def _event_span_name(
    e: Event, provider: str | None, prompt: str | None, result: Event | None
) -> tuple[str, dict[str, Any], int]:
    """Span name, GenAI (and OpenInference) attributes and span kind of one event.

    Token usage goes on LLM spans only: a ``tool_call`` or ``spawn`` that carries the usage of
    the model call behind it gets that call as a separate ``chat`` span (see :func:`_llm_span`).
    ``prompt`` is the rebuilt context when content is exported, else None.
    """
    a: dict[str, Any] = {}
    if e.type in ("tool_call", "tool_result"):
        a["gen_ai.tool.name"] = e.tool
        a["gen_ai.tool.call.id"] = e.call_id
    if e.type == "tool_call":
        a["gen_ai.operation.name"] = "execute_tool"
        a["openinference.span.kind"] = "TOOL"
        a["tool.name"] = e.tool
        if prompt is not None:
            out = result.content if result is not None else None
            a["gen_ai.tool.call.arguments"] = e.content
            a["gen_ai.tool.call.result"] = out
            a.update(_io(e.content, out))
        return f"execute_tool {e.tool}", a, SPAN_KIND_INTERNAL
    if e.type == "spawn":
        a["gen_ai.operation.name"] = "create_agent"
        a["gen_ai.agent.name"] = e.to
        a["openinference.span.kind"] = "CHAIN"
        if prompt is not None:
            a.update(_io(e.content, None))
        return f"spawn {e.agent}", a, SPAN_KIND_INTERNAL
    if e.tokens_in is not None or e.tokens_out is not None:  # the model call that produced the event
        a.update(_llm_attrs(e, provider, prompt))
        return f"chat {e.model or e.agent}", a, SPAN_KIND_CLIENT
    a["openinference.span.kind"] = "CHAIN"
    if prompt is not None:
        a.update(_io(prompt, e.content))
    return f"{e.type} {e.agent}", a, SPAN_KIND_INTERNAL


def _needs_llm_span(e: Event) -> bool:
    return e.type in ("tool_call", "spawn") and (e.tokens_in is not None or e.tokens_out is not None)


def trace_to_otlp(
    tr: Trace,
    *,
    include_content: bool = False,
    epoch: float | None = None,
    project: str | None = None,
) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` (as an OTLP/JSON dict) for one trace.

    Time zero is ``epoch`` when given, else the trace's ``metadata.t0_unix``, else now.
    ``project`` names the Phoenix project (``openinference.project.name``) and ``service.name``.
    """
    meta = tr.metadata or {}
    t0 = epoch if epoch is not None else _t0_unix(meta) or time.time()
    tid = _hex("trace:" + tr.trace_id, 16)
    ev_span = {e.id: _hex(f"event:{tr.trace_id}:{e.id}", 8) for e in tr.events}
    root = _hex(f"root:{tr.trace_id}", 8)
    end_of = {e.id: (e.t_end if e.t_end is not None else e.t) for e in tr.events}
    result_of: dict[str, Event] = {}
    for e in tr.events:
        if e.type == "tool_result" and e.call_id:
            result_of.setdefault(e.call_id, e)
    for e in tr.events:  # tool spans last until their result
        if e.type == "tool_call" and e.call_id in result_of:
            end_of[e.id] = max(end_of[e.id], result_of[e.call_id].t)
    t_max = max(end_of.values()) if end_of else 0.0
    prompts = event_prompts(tr) if include_content else [None] * len(tr.events)
    # agent spans: parent is the spawn that created the agent
    agents: dict[str, dict[str, Any]] = {}
    spawn_of: dict[str, Event] = {}
    for e in tr.events:
        if e.type == "spawn" and e.to and e.to not in spawn_of:
            spawn_of[e.to] = e
        span = agents.setdefault(e.agent, {"start": e.t, "end": end_of[e.id]})
        span["start"] = min(span["start"], e.t)
        span["end"] = max(span["end"], end_of[e.id])
    agent_span = {a: _hex(f"agent:{tr.trace_id}:{a}", 8) for a in agents}
    common = {"gen_ai.conversation.id": tr.trace_id}
    spans: list[dict[str, Any]] = []
    top = trace_to_dict(tr)
    top.pop("events")
    top.pop("edges")
    root_attrs: dict[str, Any] = {
        **common,
        "openinference.span.kind": "CHAIN",
        "session.id": tr.trace_id,
        "orchestrace.trace_id": tr.trace_id,
        "orchestrace.task_id": tr.task_id,
        "orchestrace.system": tr.system,
        "orchestrace.topology": tr.topology,
        "orchestrace.trace": orjson.dumps(top, option=orjson.OPT_SORT_KEYS).decode(),
    }
    if include_content:
        answer = next((e.content for e in reversed(tr.events) if e.content and e.type in _ANSWER_TYPES), None)
        root_attrs.update(_io(task_text(tr), answer))
    for k, v in tr.rewards.items():
        root_attrs[f"orchestrace.reward.{k}"] = float(v)
    for k, v in tr.costs.items():
        root_attrs[f"orchestrace.cost.{k}"] = float(v)
    spans.append(
        _span(tid, root, None, f"orchestrace {tr.task_id}", t0, 0.0, t_max, root_attrs, SPAN_KIND_INTERNAL)
    )
    for a, s in agents.items():
        sp = spawn_of.get(a)
        parent = ev_span[sp.id] if sp is not None else root
        attrs = {
            **common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": a,
            "gen_ai.agent.id": f"{tr.trace_id}/{a}",
            "openinference.span.kind": "AGENT",
            "orchestrace.agent": a,
        }
        start = min(s["start"], sp.t) if sp is not None else s["start"]
        spans.append(
            _span(
                tid,
                agent_span[a],
                parent,
                f"invoke_agent {a}",
                t0,
                start,
                s["end"],
                attrs,
                SPAN_KIND_INTERNAL,
            )
        )
    links: dict[str, list[dict[str, Any]]] = {}
    for x in tr.edges:
        links.setdefault(x.dst, []).append(
            {
                "traceId": tid,
                "spanId": ev_span[x.src],
                "attributes": _attrs({"orchestrace.edge.type": x.type}),
            }
        )
    for e, prompt in zip(tr.events, prompts, strict=True):
        provider = provider_of(e.model, tr.system)
        who = {**common, "gen_ai.agent.name": e.agent, "gen_ai.agent.id": f"{tr.trace_id}/{e.agent}"}
        if _needs_llm_span(e):
            llm = {**who, **_llm_attrs(e, provider, prompt)}
            if prompt is not None and e.type == "tool_call":  # the model's output was this call
                call = {"type": "tool_call", "id": e.call_id, "name": e.tool, "arguments": e.content}
                llm["gen_ai.output.messages"] = orjson.dumps(
                    [{"role": "assistant", "parts": [call]}]
                ).decode()
            llm["orchestrace.event_id"] = e.id
            sid = _hex(f"llm:{tr.trace_id}:{e.id}", 8)
            spans.append(
                _span(
                    tid,
                    sid,
                    agent_span[e.agent],
                    f"chat {e.model or e.agent}",
                    t0,
                    e.t,
                    e.t,
                    llm,
                    SPAN_KIND_CLIENT,
                )
            )
        result = result_of.get(e.call_id or "") if e.type == "tool_call" else None
        name, gen_ai, kind = _event_span_name(e, provider, prompt, result)
        d = event_to_dict(e)
        if not include_content:
            d.pop("content", None)
        attrs = {
            **who,
            **gen_ai,
            "orchestrace.event.type": e.type,
            "orchestrace.event": orjson.dumps(d).decode(),
        }
        if e.content_ref:
            attrs["orchestrace.content_ref"] = e.content_ref
        s = _span(tid, ev_span[e.id], agent_span[e.agent], name, t0, e.t, end_of[e.id], attrs, kind)
        if e.status == "error":
            s["status"] = {"code": STATUS_ERROR}
        if e.id in links:
            s["links"] = links[e.id]
        spans.append(s)
    resource = {
        "attributes": _attrs(
            {
                "service.name": project or tr.system or "orchestrace",
                "openinference.project.name": project,
                "orchestrace.schema": "orchestrace/1",
            }
        )
    }
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": SCOPE, "spans": spans}]}]}


def _span(
    tid: str,
    sid: str,
    parent: str | None,
    name: str,
    t0: float,
    start: float,
    end: float,
    attrs: dict[str, Any],
    kind: int,
) -> dict[str, Any]:
    s: dict[str, Any] = {"traceId": tid, "spanId": sid}
    if parent is not None:
        s["parentSpanId"] = parent
    s.update(
        name=name,
        kind=kind,
        startTimeUnixNano=_ns(t0 + start, f"span {name!r} start"),
        endTimeUnixNano=_ns(t0 + max(start, end), f"span {name!r} end"),
        attributes=_attrs(attrs),
        status={"code": STATUS_OK} if parent is None else {},
    )
    return s


ENCODINGS = ("protobuf", "json")


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """Options from Python or from the CLI (``--opt include_content=true``, strings)."""
    from ..core.errors import OrchestraceError

    out: dict[str, Any] = {}
    for k, v in options.items():
        if k == "include_content":
            out[k] = v.strip().lower() in ("1", "true", "yes", "on") if isinstance(v, str) else bool(v)
        elif k == "epoch":
            try:  # float("abc") was an internal error; nan or 1e300 fail at the first span (OT416)
                out[k] = None if v is None else float(v)
            except ValueError:
                raise OrchestraceError(
                    "OT020", f"otlp option epoch must be a number of seconds, got {v!r}"
                ) from None
        elif k == "project":
            out[k] = None if v is None else str(v)
        else:
            raise OrchestraceError(
                "OT020", f"unknown otlp option {k!r}; known: include_content, epoch, project"
            )
    return out


def iter_otlp(traces: Iterable[Trace], **options: Any) -> Iterator[dict[str, Any]]:
    """One request per trace; traces that do not say when they started share one export time."""
    opts = _options(options)
    epoch = opts.pop("epoch", None)
    now = time.time()
    for tr in traces:
        t0 = epoch if epoch is not None else _t0_unix(tr.metadata or {}) or now
        yield trace_to_otlp(tr, epoch=t0, **opts)


def to_protobuf(req: dict[str, Any]) -> Any:
    """The OTLP/JSON request as the official ``ExportTraceServiceRequest`` protobuf message.

    OTLP/JSON writes ids as hex, protobuf's JSON mapping reads bytes as base64: ids are recoded,
    everything else parses as it is.
    """
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def b64(h: str) -> str:
        return base64.b64encode(bytes.fromhex(h)).decode()

    recoded = {"resourceSpans": []}
    for rs in req["resourceSpans"]:
        scopes = []
        for ss in rs["scopeSpans"]:
            spans = []
            for sp in ss["spans"]:
                sp = {**sp, "traceId": b64(sp["traceId"]), "spanId": b64(sp["spanId"])}
                if "parentSpanId" in sp:
                    sp["parentSpanId"] = b64(sp["parentSpanId"])
                if "links" in sp:
                    sp["links"] = [
                        {**x, "traceId": b64(x["traceId"]), "spanId": b64(x["spanId"])} for x in sp["links"]
                    ]
                spans.append(sp)
            scopes.append({**ss, "spans": spans})
        recoded["resourceSpans"].append({**rs, "scopeSpans": scopes})
    return ParseDict(recoded, ExportTraceServiceRequest())


def export_otlp(traces: Iterable[Trace], out: str, **options: Any) -> int:
    """Write OTLP spans; returns spans written.

    - an ``http(s)://`` URL: POST one request per trace to that OTLP/HTTP endpoint (Phoenix at
      ``http://127.0.0.1:6006/v1/traces``, a Collector or Jaeger at ``:4318/v1/traces``), as
      protobuf (``application/x-protobuf``, the OTLP default) or with ``encoding=json``;
    - a ``grpc://host:port`` (``grpcs://`` for TLS) endpoint: OTLP/gRPC ``TraceService/Export``,
      one call per trace (needs ``grpcio``);
    - a ``.pb`` / ``.binpb`` file: one binary protobuf ``ExportTraceServiceRequest`` holding every trace;
    - a ``.jsonl`` file: OTLP/JSON, one request per line (the OTel Collector file format);
    - any other name: one OTLP/JSON request holding every trace.

    Options: ``include_content`` (default False: no text leaves the machine), ``epoch`` (POSIX
    seconds of t = 0; default the trace's ``metadata.t0_unix``, else the time of export),
    ``project`` (Phoenix project / ``service.name``), and for HTTP ``encoding``
    (``protobuf``/``json``), ``headers`` (``"k=v,k2=v2"`` or a dict, e.g. an ``Authorization``
    header for Langfuse) and ``timeout`` (seconds, default 10).
    """
    from ..core.errors import OrchestraceError

    p = os.fspath(out)
    http = {k: options.pop(k) for k in ("headers", "timeout", "encoding") if k in options}
    if p.startswith(("http://", "https://")):
        return _post(iter_otlp(traces, **options), p, **http)
    if p.startswith(("grpc://", "grpcs://")):
        if "encoding" in http:
            raise OrchestraceError("OT020", "OTLP/gRPC is always protobuf: drop the encoding option")
        return _post_grpc(iter_otlp(traces, **options), p, **http)
    if http:
        raise OrchestraceError(
            "OT020", "headers/timeout/encoding apply only when the output is an OTLP endpoint"
        )
    n = 0
    lines = p.endswith(".jsonl")
    binary = p.endswith((".pb", ".binpb"))
    merged: list[dict[str, Any]] = []
    # atomic_output: -o FOLDER was IsADirectoryError at the final rename (exit 3) and a failed
    # export left its .part file behind
    place = atomic_output(p) if p != "-" else nullcontext("/dev/stdout")
    with place as tmp, open(tmp, "wb") as f:
        for req in iter_otlp(traces, **options):
            n += _count(req)
            if lines:
                f.write(orjson.dumps(req) + b"\n")
            else:
                merged.extend(req["resourceSpans"])
        if binary:
            f.write(to_protobuf({"resourceSpans": merged}).SerializeToString())
        elif not lines:
            f.write(orjson.dumps({"resourceSpans": merged}) + b"\n")
    return n


def _count(req: dict[str, Any]) -> int:
    return sum(len(s["spans"]) for rs in req["resourceSpans"] for s in rs["scopeSpans"])


def _headers(headers: Any) -> dict[str, str]:
    if isinstance(headers, str):
        return dict(kv.split("=", 1) for kv in headers.split(",") if "=" in kv)
    if isinstance(headers, dict):
        return {str(k): str(v) for k, v in headers.items()}
    return {}


def _post_grpc(requests: Iterable[dict[str, Any]], url: str, headers: Any = None, timeout: Any = 10) -> int:
    """Call ``TraceService/Export`` once per request; a refused call is a user error."""
    from ..core.errors import OrchestraceError

    try:
        import grpc
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub
    except ImportError:
        raise OrchestraceError("OT023", "OTLP/gRPC needs grpcio: pip install grpcio", path=url) from None
    target = url.split("://", 1)[1].rstrip("/")
    channel = (
        grpc.secure_channel(target, grpc.ssl_channel_credentials())
        if url.startswith("grpcs://")
        else grpc.insecure_channel(target)
    )
    metadata = [(k.lower(), v) for k, v in _headers(headers).items()]  # gRPC metadata keys are lowercase
    n = 0
    try:
        stub = TraceServiceStub(channel)
        for req in requests:
            try:
                stub.Export(to_protobuf(req), timeout=float(timeout), metadata=metadata)
            except grpc.RpcError as e:
                raise OrchestraceError(
                    "OT023", f"OTLP/gRPC endpoint refused the spans: {e.code().name} {e.details()}", path=url
                ) from None
            n += _count(req)
    finally:
        channel.close()
    return n


def _post(
    requests: Iterable[dict[str, Any]],
    url: str,
    headers: Any = None,
    timeout: Any = 10,
    encoding: str = "protobuf",
) -> int:
    """POST each request (OTLP/HTTP, protobuf or JSON); a refused request is a user error."""
    import urllib.error
    import urllib.request

    from ..core.errors import OrchestraceError

    if encoding not in ENCODINGS:
        raise OrchestraceError("OT020", f"encoding must be one of {', '.join(ENCODINGS)}, got {encoding!r}")
    ctype = "application/x-protobuf" if encoding == "protobuf" else "application/json"
    hdrs = {"Content-Type": ctype, **_headers(headers)}
    n = 0
    for req in requests:
        body = to_protobuf(req).SerializeToString() if encoding == "protobuf" else orjson.dumps(req)
        r = urllib.request.Request(url, data=body, headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(r, timeout=float(timeout)) as resp:
                resp.read()
        except urllib.error.HTTPError as e:
            detail = e.read()[:200].decode(errors="replace")
            raise OrchestraceError(
                "OT023", f"OTLP endpoint refused the spans: HTTP {e.code} {detail}", path=url
            ) from None
        except (urllib.error.URLError, OSError) as e:
            raise OrchestraceError(
                "OT023", f"cannot reach the OTLP endpoint: {getattr(e, 'reason', e)}", path=url
            ) from None
        n += _count(req)
    return n
