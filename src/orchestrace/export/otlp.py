"""Traces as OpenTelemetry spans in the OTLP/JSON encoding (viewable in Jaeger, Phoenix, Langfuse).

Layout of one trace (one OTel trace id, derived from ``trace_id``):

- a root span ``orchestrace <task_id>`` holding the trace-level fields (rewards, costs, metrics,
  metadata) as ``orchestrace.*`` attributes;
- per agent an ``invoke_agent <agent>`` span (GenAI semantic conventions) covering its events,
  child of the span of the event that spawned it, else of the root;
- per event a span under its agent's span: ``execute_tool <tool>`` for tool calls (lasting until
  the matching result), ``chat <model>`` for events with token usage, otherwise
  ``<type> <agent>``; ``gen_ai.*`` attributes carry model, tokens, tool name and call id;
- every dependency edge as a span link (``orchestrace.edge.type``) on its destination span.

OpenInference kinds (``openinference.span.kind`` AGENT/TOOL/LLM/CHAIN, ``llm.token_count.*``)
are set as well, so Phoenix shows agents, tools and model calls without a mapping step.

Each event span also carries the event itself as JSON (``orchestrace.event``) so that importing
the file again gives back the same events and edges. Content is left out unless
``include_content=True`` (``content_ref`` stays). Ids follow OTLP/JSON: lowercase hex,
int64 values as decimal strings, enums as integers.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ..core.model import Event, Trace, event_to_dict, trace_to_dict

SCOPE = {"name": "orchestrace", "version": "0.1.0"}
SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_OK, STATUS_ERROR = 1, 2
DEFAULT_EPOCH = 1_700_000_000.0  # used when a trace does not say when it started


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


def _ns(seconds: float) -> str:
    return str(int(round(seconds * 1e9)))


def _event_span_name(e: Event) -> tuple[str, dict[str, Any], int]:
    """Span name, GenAI (and OpenInference) attributes and span kind of one event."""
    a: dict[str, Any] = {}
    if e.tokens_in is not None or e.tokens_out is not None:  # the model call that produced the event
        a["gen_ai.request.model"] = e.model
        a["gen_ai.usage.input_tokens"] = e.tokens_in
        a["gen_ai.usage.output_tokens"] = e.tokens_out
        a["llm.model_name"] = e.model
        a["llm.token_count.prompt"] = e.tokens_in
        a["llm.token_count.completion"] = e.tokens_out
    if e.type in ("tool_call", "tool_result"):
        a["gen_ai.tool.name"] = e.tool
        a["gen_ai.tool.call.id"] = e.call_id
    if e.type == "tool_call":
        a["gen_ai.operation.name"] = "execute_tool"
        a["openinference.span.kind"] = "TOOL"
        a["tool.name"] = e.tool
        return f"execute_tool {e.tool}", a, SPAN_KIND_INTERNAL
    if e.type == "spawn":
        a["gen_ai.operation.name"] = "create_agent"
        a["gen_ai.agent.name"] = e.to
        a["openinference.span.kind"] = "CHAIN"
        return f"spawn {e.agent}", a, SPAN_KIND_INTERNAL
    if "gen_ai.usage.input_tokens" in a:
        a["gen_ai.operation.name"] = "chat"
        a["openinference.span.kind"] = "LLM"
        return f"chat {e.model or e.agent}", a, SPAN_KIND_CLIENT
    a["openinference.span.kind"] = "CHAIN"
    return f"{e.type} {e.agent}", a, SPAN_KIND_INTERNAL


def trace_to_otlp(tr: Trace, *, include_content: bool = False, epoch: float | None = None) -> dict[str, Any]:
    """One ``ExportTraceServiceRequest`` (as a JSON-ready dict) for one trace."""
    meta = tr.metadata or {}
    t0 = epoch if epoch is not None else meta.get("t0_unix") or DEFAULT_EPOCH
    tid = _hex("trace:" + tr.trace_id, 16)
    ev_span = {e.id: _hex(f"event:{tr.trace_id}:{e.id}", 8) for e in tr.events}
    root = _hex(f"root:{tr.trace_id}", 8)
    end_of = {e.id: (e.t_end if e.t_end is not None else e.t) for e in tr.events}
    result_t: dict[str, float] = {}
    for e in tr.events:
        if e.type == "tool_result" and e.call_id:
            result_t.setdefault(e.call_id, e.t)
    for e in tr.events:  # tool spans last until their result
        if e.type == "tool_call" and e.call_id in result_t:
            end_of[e.id] = max(end_of[e.id], result_t[e.call_id])
    t_max = max(end_of.values()) if end_of else 0.0
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
    spans: list[dict[str, Any]] = []
    top = trace_to_dict(tr)
    top.pop("events")
    top.pop("edges")
    root_attrs: dict[str, Any] = {
        "orchestrace.trace_id": tr.trace_id,
        "orchestrace.task_id": tr.task_id,
        "orchestrace.system": tr.system,
        "orchestrace.topology": tr.topology,
        "orchestrace.trace": orjson.dumps(top, option=orjson.OPT_SORT_KEYS).decode(),
    }
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
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": a,
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
    for e in tr.events:
        name, gen_ai, kind = _event_span_name(e)
        d = event_to_dict(e)
        if not include_content:
            d.pop("content", None)
        attrs = {**gen_ai, "orchestrace.event.type": e.type, "orchestrace.event": orjson.dumps(d).decode()}
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
            {"service.name": tr.system or "orchestrace", "orchestrace.schema": "orchestrace/1"}
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
        startTimeUnixNano=_ns(t0 + start),
        endTimeUnixNano=_ns(t0 + max(start, end)),
        attributes=_attrs(attrs),
        status={"code": STATUS_OK} if parent is None else {},
    )
    return s


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """Options from Python or from the CLI (``--opt include_content=true``, strings)."""
    out: dict[str, Any] = {}
    for k, v in options.items():
        if k == "include_content":
            out[k] = v.strip().lower() in ("1", "true", "yes", "on") if isinstance(v, str) else bool(v)
        elif k == "epoch":
            out[k] = None if v is None else float(v)
        else:
            from ..core.errors import OrchestraceError

            raise OrchestraceError("OT020", f"unknown otlp option {k!r}; known: include_content, epoch")
    return out


def iter_otlp(traces: Iterable[Trace], **options: Any) -> Iterator[dict[str, Any]]:
    opts = _options(options)
    for tr in traces:
        yield trace_to_otlp(tr, **opts)


def export_otlp(traces: Iterable[Trace], out: str, **options: Any) -> int:
    """Write OTLP/JSON: one ``ExportTraceServiceRequest`` per line (``.jsonl``, the OTel Collector
    file format) or one request holding every trace (any other name); or, when ``out`` is an
    ``http(s)://`` URL, POST one request per trace to that OTLP/HTTP endpoint (e.g. Jaeger or a
    Collector at ``http://localhost:4318/v1/traces``). Returns spans written.

    Options: ``include_content`` (default False), ``epoch`` (POSIX seconds of t = 0 when the
    trace's ``metadata.t0_unix`` is absent), ``headers`` for HTTP (``"k=v,k2=v2"`` or a dict,
    e.g. an ``Authorization`` header for Langfuse) and ``timeout`` (seconds, default 10).
    """
    p = os.fspath(out)
    http = {k: options.pop(k) for k in ("headers", "timeout") if k in options}
    if p.startswith(("http://", "https://")):
        return _post(iter_otlp(traces, **options), p, **http)
    if http:
        from ..core.errors import OrchestraceError

        raise OrchestraceError(
            "OT020", "headers/timeout apply only when the output is an http(s):// endpoint"
        )
    if p != "-":
        Path(p).parent.mkdir(parents=True, exist_ok=True)
    n = 0
    lines = p.endswith(".jsonl")
    merged: list[dict[str, Any]] = []
    with open(p if p != "-" else "/dev/stdout", "wb") as f:
        for req in iter_otlp(traces, **options):
            n += _count(req)
            if lines:
                f.write(orjson.dumps(req) + b"\n")
            else:
                merged.extend(req["resourceSpans"])
        if not lines:
            f.write(orjson.dumps({"resourceSpans": merged}) + b"\n")
    return n


def _count(req: dict[str, Any]) -> int:
    return sum(len(s["spans"]) for rs in req["resourceSpans"] for s in rs["scopeSpans"])


def _post(requests: Iterable[dict[str, Any]], url: str, headers: Any = None, timeout: Any = 10) -> int:
    """POST each request as ``application/json`` (OTLP/HTTP); a refused request is a user error."""
    import urllib.error
    import urllib.request

    from ..core.errors import OrchestraceError

    hdrs = {"Content-Type": "application/json"}
    if isinstance(headers, str):
        hdrs.update(kv.split("=", 1) for kv in headers.split(",") if "=" in kv)
    elif isinstance(headers, dict):
        hdrs.update({str(k): str(v) for k, v in headers.items()})
    n = 0
    for req in requests:
        r = urllib.request.Request(url, data=orjson.dumps(req), headers=hdrs, method="POST")
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
