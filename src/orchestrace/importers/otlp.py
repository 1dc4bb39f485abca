"""OpenTelemetry GenAI spans (OTLP/JSON) as traces.

Input: a JSON file holding one ``ExportTraceServiceRequest`` (``{"resourceSpans": [...]}``) or a
JSONL file with one per line (the OTel Collector file format). Span and trace ids may be hex
(OTLP/JSON) or base64 (protobuf JSON mapping). One OTel trace id is one orchestrace trace.

Spans written by :mod:`orchestrace.export.otlp` carry their event (``orchestrace.event``) and
come back exactly. Other spans follow the GenAI semantic conventions:

- ``invoke_agent`` (``gen_ai.operation.name`` or span name) -> the agent's span; a nested agent
  span becomes a ``spawn`` by the enclosing agent at its start and a ``return`` at its end;
- ``execute_tool`` -> ``tool_call`` at start and ``tool_result`` at end (``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``; span status error or ``error.type`` -> status error);
- an agent span's ``gen_ai.caller.name`` (``gen_ai.caller.type`` agent) names its spawner in place
  of the enclosing agent (another type: no spawn); an ``execute_tool`` span's
  ``gen_ai.transfer.target.name`` is a ``spawn`` of the target by the tool's agent (``kind``
  ``delegation`` with a ``return`` at the tool's end, or ``handoff`` for ``gen_ai.transfer.mode =
  pass_control``: a ``message`` when the target is spawned already), unless the target's own
  span is inside the tool's;
- ``chat`` / ``text_completion`` / ``generate_content`` / any span with ``gen_ai.usage.*`` ->
  an ``orchestrator_decision`` (kind ``llm_call``) with model and token usage.

OpenInference (``openinference.span.kind`` AGENT/TOOL/LLM, as Phoenix records) and Traceloop
(``traceloop.span.kind`` agent/tool) spans are read the same way.

Other spans (HTTP, database, ...) are counted as unknown and skipped.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson

from ..core.build import TraceBuilder
from ..core.errors import LoadError
from ..core.model import event_from_dict, trace_from_dict
from ..core.read import parse_json
from .reading import ImportStats, head_bytes, iter_jsonl, require_nonempty
from .redact import redact
from .staging import ImportStaging
from .values import as_int, as_list, as_obj

NAME = "otel"
DESCRIPTION = "OpenTelemetry GenAI spans, OTLP/JSON (.json request or .jsonl collector file)"

LLM_OPS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    return p.endswith((".json", ".jsonl")) and b'"resourceSpans"' in head_bytes(p, 4096)


def _id(v: Any) -> str:
    """Span/trace id as lowercase hex, from hex or base64."""
    if not isinstance(v, str) or not v:
        return ""
    if len(v) in (16, 32) and all(c in "0123456789abcdefABCDEF" for c in v):
        return v.lower()
    try:
        return base64.b64decode(v, validate=True).hex()
    except (binascii.Error, ValueError):
        return v


def _val(v: dict[str, Any]) -> Any:
    if not isinstance(v, dict) or not v:
        return None
    k, x = next(iter(v.items()))
    if k == "intValue":  # beyond int64 it stays as written, so a reader can say it did not read it
        n = as_int(x)
        return x if n is None else n
    if k == "arrayValue":
        return [_val(y) for y in as_list(as_obj(x).get("values"))]
    if k == "kvlistValue":
        return _attrs(as_obj(x).get("values"))
    return x


def _attrs(items: Any) -> dict[str, Any]:
    return {
        str(a["key"]): _val(a.get("value"))
        for a in as_list(items)
        if isinstance(a, dict) and isinstance(a.get("key"), str)
    }


def _requests(p: Path, stats: ImportStats) -> list[dict[str, Any]]:
    if p.suffix == ".jsonl":
        return [r for _, r in iter_jsonl(p, stats) if isinstance(r, dict)]
    d = parse_json(p.read_bytes(), path=str(p))  # says "truncated" for a cut-off file
    return [d] if isinstance(d, dict) else []


def spans_of_request(
    req: dict[str, Any], stats: ImportStats, by_trace: dict[str, list[dict[str, Any]]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """The spans of one ``ExportTraceServiceRequest`` (OTLP/JSON, or protobuf read with the JSON
    mapping) grouped by trace id, with decoded ids, attributes and times (s)."""
    by_trace = defaultdict(list) if by_trace is None else by_trace
    for rs in map(as_obj, as_list(req.get("resourceSpans"))):
        resource = _attrs(as_obj(rs.get("resource")).get("attributes"))
        scopes = as_list(rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans"))
        for ss in map(as_obj, scopes):
            for s in as_list(ss.get("spans")):
                if not isinstance(s, dict):
                    stats.bad_values["span that is not an object"] += 1
                    continue
                name = s.get("name")
                span = {
                    "trace": _id(s.get("traceId")),
                    "id": _id(s.get("spanId")),
                    "parent": _id(s.get("parentSpanId")),
                    "name": name if isinstance(name, str) else "",
                    "start": _seconds(s.get("startTimeUnixNano"), stats),
                    "end": _seconds(s.get("endTimeUnixNano"), stats),
                    "attrs": _attrs(s.get("attributes")),
                    "status": as_obj(s.get("status")).get("code"),
                    "links": [
                        (_id(x.get("spanId")), _attrs(x.get("attributes")))
                        for x in map(as_obj, as_list(s.get("links")))
                    ],
                    "resource": resource,
                }
                by_trace[span["trace"]].append(span)
    return by_trace


def read_spans(
    path: str | os.PathLike[str], stats: ImportStats | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Spans of an OTLP/JSON file grouped by trace id, with decoded ids/attributes/times (s)."""
    stats = stats or ImportStats()
    by_trace: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for req in _requests(Path(path), stats):
        spans_of_request(req, stats, by_trace)
    return by_trace


def _roundtrip(tid: str, spans: list[dict[str, Any]]) -> Any:
    """A trace exported by orchestrace, rebuilt from its own attributes."""
    root = next(s for s in spans if "orchestrace.trace" in s["attrs"])
    top = orjson.loads(root["attrs"]["orchestrace.trace"])
    ev_spans = sorted((s for s in spans if "orchestrace.event" in s["attrs"]), key=lambda s: s["start"])
    id_of = {s["id"]: orjson.loads(s["attrs"]["orchestrace.event"])["id"] for s in ev_spans}
    events = [event_from_dict(orjson.loads(s["attrs"]["orchestrace.event"])) for s in ev_spans]
    events.sort(key=lambda e: (e.t, int(e.id[1:]) if e.id[1:].isdigit() else 0))
    built = TraceBuilder()
    for e in events:
        built.add(e)
    for s in ev_spans:
        for src, la in s["links"]:
            if src in id_of:
                built.edge(id_of[src], id_of[s["id"]], la.get("orchestrace.edge.type", "causal"))
    top["events"] = []
    tr = trace_from_dict(top)
    tr.events, tr.edges = built.events, built.edges
    return tr


def agent_name(s: dict[str, Any]) -> str | None:
    """The agent an ``invoke_agent`` span (or an OpenInference/Traceloop agent span) runs."""
    a = s["attrs"]
    op = a.get("gen_ai.operation.name")
    if op == "invoke_agent" or s["name"].startswith("invoke_agent"):
        name = a.get("gen_ai.agent.name") or a.get("gen_ai.agent.id")
        if not name:
            parts = s["name"].split(" ", 1)
            name = parts[1] if len(parts) == 2 else "agent"
        return str(name)
    return None


def normalize(s: dict[str, Any]) -> None:
    """OpenInference (Phoenix) and Traceloop (OpenLLMetry) span kinds as GenAI attributes."""
    a = s["attrs"]
    kind = str(a.get("openinference.span.kind") or a.get("traceloop.span.kind") or "").lower()
    entity = a.get("traceloop.entity.name") or s["name"]
    if kind == "agent":
        a.setdefault("gen_ai.operation.name", "invoke_agent")
        a.setdefault("gen_ai.agent.name", a.get("agent.name") or entity)
    elif kind == "tool":
        a.setdefault("gen_ai.operation.name", "execute_tool")
        a.setdefault("gen_ai.tool.name", a.get("tool.name") or entity)
        if "tool_call.id" in a:
            a.setdefault("gen_ai.tool.call.id", a["tool_call.id"])
    elif kind == "llm":
        a.setdefault("gen_ai.operation.name", "chat")
        for src, dst in (
            ("llm.model_name", "gen_ai.request.model"),
            ("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
            ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
        ):
            if src in a:
                a.setdefault(dst, a[src])


def operation(s: dict[str, Any]) -> str:
    """A span's GenAI operation: ``gen_ai.operation.name``, else its name's first word."""
    op = s["attrs"].get("gen_ai.operation.name")
    return op if isinstance(op, str) and op else s["name"].split(" ", 1)[0]


def is_error(s: dict[str, Any]) -> bool:
    return s["status"] in (2, "STATUS_CODE_ERROR") or "error.type" in s["attrs"]


def tool_of(s: dict[str, Any]) -> tuple[str, str]:
    """An ``execute_tool`` span's tool name and call id (the span id when it has none)."""
    a = s["attrs"]
    return str(a.get("gen_ai.tool.name") or s["name"].split(" ", 1)[-1]), str(
        a.get("gen_ai.tool.call.id") or s["id"]
    )


def caller_of(s: dict[str, Any], enclosing: str | None) -> str | None:
    """Who invoked an agent span: ``gen_ai.caller.name`` when the caller is an agent
    (``gen_ai.caller.type`` ``agent`` or unset), None for a workflow or any other caller type,
    else the agent whose span encloses it."""
    a = s["attrs"]
    if str(a.get("gen_ai.caller.type") or "agent") != "agent":
        return None
    name = a.get("gen_ai.caller.name")
    return str(name) if name else enclosing


def transfer_of(s: dict[str, Any]) -> tuple[str, str] | None:
    """An ``execute_tool`` span's transfer to another agent: (target, mode), mode
    ``return_to_caller`` (the default: an agent used as a tool) or ``pass_control`` (a handoff)."""
    a = s["attrs"]
    target = a.get("gen_ai.transfer.target.name")
    if not target or str(a.get("gen_ai.transfer.target.type") or "agent") != "agent":
        return None
    return str(target), str(a.get("gen_ai.transfer.mode") or "return_to_caller")


def _seconds(value: Any, stats: ImportStats) -> float | None:
    """A span time in seconds; None (noted) for one that is no positive int64 of nanoseconds,
    which read as 0 put that span at 1970 and every other event ~1.7e9 s after it."""
    ns = as_int(value)
    if ns is not None and ns > 0:
        return ns / 1e9
    if value is not None:
        stats.bad_values["span time"] += 1
    return None


def _fill_times(spans: list[dict[str, Any]]) -> None:
    """A missing start takes the span's end, a missing end its start; a span with neither takes
    the trace's first known time (0 when no span has one)."""
    known = [t for s in spans for t in (s["start"], s["end"]) if t is not None]
    first = min(known) if known else 0.0
    for s in spans:
        start = s["start"] if s["start"] is not None else s["end"]
        s["start"] = first if start is None else start
        s["end"] = s["start"] if s["end"] is None else s["end"]


def _cut_off(a: dict[str, Any]) -> bool:
    """An LLM span whose ``gen_ai.response.finish_reasons`` says ``length``: its answer was cut off
    by the token limit (``truncated`` in our traces, as the runtime marks it)."""
    reasons = a.get("gen_ai.response.finish_reasons")
    return "length" in (reasons if isinstance(reasons, list) else [reasons])


def usage(a: dict[str, Any], stats: ImportStats) -> tuple[int | None, int | None]:
    tin = a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens"))
    tout = a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens"))
    return _tokens(tin, stats), _tokens(tout, stats)


def _tokens(value: Any, stats: ImportStats) -> int | None:
    """A token count; None (noted) for a negative, non-integral or beyond-int64 one: read as is,
    a negative count made the trace invalid and the whole file was skipped."""
    n = as_int(value)
    if n is not None and n >= 0:
        return n
    if value is not None:
        stats.bad_values["gen_ai.usage token count"] += 1
    return None


def _genai(tid: str, spans: list[dict[str, Any]], b: ImportStaging) -> None:
    for s in spans:
        normalize(s)
    by_id = {s["id"]: s for s in spans}
    children: dict[str, list[dict[str, Any]]] = defaultdict(list)
    roots = []
    for s in sorted(spans, key=lambda s: (s["start"], s["end"])):
        if s["parent"] and s["parent"] in by_id:
            children[s["parent"]].append(s)
        else:
            roots.append(s)
    seen: set[int] = set()
    handed: set[tuple[str, str]] = set()  # (caller, target) a tool span's transfer recorded

    def handover(who: str, s: dict[str, Any]) -> None:
        """A tool span's ``gen_ai.transfer.*``, unless the target's own span is inside it."""
        transfer = transfer_of(s)
        if transfer is None or transfer[0] == who:
            return
        target, mode = transfer
        todo = list(children.get(s["id"], ()))
        while todo:
            c = todo.pop()
            if agent_name(c) == target:
                return
            todo.extend(children.get(c["id"], ()))
        handed.add((who, target))
        attrs = {"span_id": s["id"], "kind": "handoff" if mode == "pass_control" else "delegation"}
        if mode == "pass_control" and b.is_spawned(target):
            b.add("message", who, s["start"], to=target, attrs=attrs)
            return
        b.spawn(who, target, s["start"], attrs=attrs)
        if mode != "pass_control":
            b.ret(target, s["end"], status="error" if is_error(s) else "ok", attrs={"span_id": s["id"]})

    def visit(s: dict[str, Any], agent: str | None) -> None:
        if id(s) in seen:  # a span that is its own ancestor (a parent cycle): once only
            return
        seen.add(id(s))
        a = s["attrs"]
        name = agent_name(s)
        op = operation(s)
        error = is_error(s)
        me = agent
        after: tuple[str, str, str] | None = None  # a tool result comes after what the tool did
        spawned = False
        if name is not None:
            me = name
            caller = caller_of(s, agent)
            if (caller, name) in handed:  # its caller's tool span said it already
                handed.discard((caller, name))
            elif caller is not None and caller != name:
                b.spawn(caller, name, s["start"], attrs={"span_id": s["id"], "span_name": s["name"]})
                spawned = True
        elif op == "execute_tool":
            who = agent or "agent"
            tool, cid = tool_of(s)
            tin, tout = usage(a, b.stats)
            b.tool_call(
                who,
                s["start"],
                tool,
                cid,
                model=a.get("gen_ai.response.model") or a.get("gen_ai.request.model"),
                tokens_in=tin,
                tokens_out=tout,
                attrs={"span_id": s["id"]},
                content=a.get("gen_ai.tool.call.arguments"),
            )
            handover(who, s)
            after = (who, tool, cid)
        elif op in LLM_OPS or any(k.startswith("gen_ai.usage.") for k in a):
            tin, tout = usage(a, b.stats)
            b.add(
                "orchestrator_decision",
                agent or str(a.get("gen_ai.system") or a.get("gen_ai.provider.name") or "llm"),
                s["start"],
                t_end=s["end"],
                model=a.get("gen_ai.response.model") or a.get("gen_ai.request.model"),
                tokens_in=tin,
                tokens_out=tout,
                status="error" if error else None,
                attrs={"kind": "llm_call", "span_id": s["id"], "operation": op}
                | ({"truncated": True} if _cut_off(a) else {}),
            )
        else:
            b.stats.unknown[f"span {s['name'][:40]}"] += 1
        for c in children.get(s["id"], ()):
            visit(c, me)
        if spawned:
            b.ret(name, s["end"], status="error" if error else "ok", attrs={"span_id": s["id"]})
        if after is not None:
            who, tool, cid = after
            status = "error" if error else "ok"
            b.tool_result(who, s["end"], tool, cid, status=status, content=a.get("gen_ai.tool.call.result"))

    for r in roots:
        visit(r, None)
    cyclic = [s for s in sorted(spans, key=lambda s: (s["start"], s["end"])) if id(s) not in seen]
    if cyclic:  # parents that lead round in a circle: each such span was lost with its subtree
        b.stats.bad_values["span in or under a parent cycle"] += len(cyclic)
        for s in cyclic:
            visit(s, None)


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    stats = ImportStats()
    groups = read_spans(p, stats)
    if not groups:
        raise LoadError("OT006", "no spans in this OTLP file", path=str(p))
    for tid, spans in groups.items():
        _fill_times(spans)
        if any("orchestrace.trace" in s["attrs"] for s in spans):
            try:
                tr = _roundtrip(tid, spans)
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as e:
                # the orchestrace.* attributes hold our own JSON; damaged, they are bad input
                raise LoadError(
                    "OT023",
                    f"trace {tid}: the orchestrace.trace/orchestrace.event span attributes do not hold "
                    f"an orchestrace trace ({type(e).__name__}: {str(e)[:120]})",
                    path=str(p),
                ) from None
            for e in tr.events:  # as from any other log: no text, or text with secrets redacted
                e.content = redact(e.content) if keep_content and e.content is not None else None
            yield tr
            continue
        b = ImportStaging(keep_content=keep_content)
        b.stats = stats
        _genai(tid, spans, b)
        if not b.events:
            stats.notes.append(f"trace {tid}: no GenAI spans")
            continue
        service = next(
            (s["resource"].get("service.name") for s in spans if s["resource"].get("service.name")), None
        )
        meta = {"source_format": NAME, "source": str(p), "otel_trace_id": tid, "spans": len(spans)}
        yield b.build(
            trace_id=f"otel:{tid}",
            task_id=tid,
            system=str(service or "otel"),
            topology="centralized" if any(e.type == "spawn" for e in b.events) else "unknown",
            metadata=meta,
            t0=min(s["start"] for s in spans if s["start"] > 0)
            if any(s["start"] > 0 for s in spans)
            else None,
        )
