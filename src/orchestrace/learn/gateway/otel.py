"""OpenTelemetry spans of a gateway run (OTLP/HTTP, protobuf or JSON) merged into its trace.

A framework instrumented with OpenTelemetry (OTel GenAI conventions, or OpenInference as Phoenix
records) exports its spans to ``<base_url>/traces``; the gateway keeps them with the run and
merges them when the run ends (spans are exported only once they end, children before their
parents, so a span's agent is known only when its ancestors have arrived). The span mapping is the
OTLP importer's (``importers.otlp``: ``invoke_agent`` / AGENT spans are agents, ``execute_tool`` /
TOOL spans tool calls, ``chat`` / LLM spans model calls); what is added here is how the spans meet
the calls the gateway recorded itself:

- an LLM span is joined to the gateway call it made, never recorded twice: by the completion id
  (``gen_ai.response.id``, or the gateway's ``chatcmpl-...`` id in OpenInference's
  ``output.value``), else by the model name (the gateway agent) with the call's time inside the
  span's; an LLM span that matches no call (a model not behind the gateway) becomes an
  ``orchestrator_decision`` (``kind = llm_call``) of its agent;
- a framework agent is the gateway agent whose calls its spans hold (an Agents SDK "Solver"
  whose model is ``solver``), else its own name; a LangGraph node (OpenInference ``graph.node.id``
  or ``metadata.langgraph_node``) is an agent too;
- an agent invoked by another (its span inside the other's, ``gen_ai.caller.name``, or a tool
  span's ``gen_ai.transfer.target.name``): a ``message`` from caller to callee into the callee's
  first event there and, unless control passed for good (``gen_ai.transfer.mode = pass_control``),
  a ``message`` back from the callee's last event; an agent that made no gateway call is spawned
  by its caller and returns to it;
- a tool span: ``tool_call`` / ``tool_result`` of its agent, after the call that asked for it and
  before the agent's next call.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import orjson

from ...importers.otlp import (
    LLM_OPS,
    agent_name,
    caller_of,
    is_error,
    normalize,
    operation,
    spans_of_request,
    tool_of,
    transfer_of,
    usage,
)
from ...importers.reading import ImportStats
from ...importers.values import as_text
from ...runtime.recorder import ROOT_AGENT
from .protocol import GatewayError
from .runs import AgentState, Call, GatewayRun

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
COMPLETION_ID = re.compile(r"chatcmpl-[0-9a-f]{24}")
TOOL_CALL_ID = re.compile(r'"tool_call_id":\s*"([^"]{1,200})"')  # a LangChain ToolMessage's
#: a gateway call inside an LLM span, allowing for the two clocks' rounding (s)
SLACK = 0.05
END = 2**63  # past any place in a log
#: spans nested deeper are merged as roots (the walk is recursive; no framework nests agents so deep)
MAX_DEPTH = 100


# ------------------------------------------------------------------ the wire


def decode_request(body: bytes, content_type: str, encoding: str, max_bytes: int) -> list[dict[str, Any]]:
    """The spans of an OTLP/HTTP export body (every one, all traces), each as the importer reads
    it; every malformed part a 400."""
    ctype = content_type.split(";", 1)[0].strip().lower()
    body = _inflate(body, encoding.strip().lower(), max_bytes)
    if ctype == PROTOBUF:
        req = _from_protobuf(body)
    elif ctype == JSON:
        try:
            req = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise GatewayError(400, f"the body is not JSON ({e})") from None
    else:
        raise GatewayError(
            415, f"Content-Type must be {PROTOBUF} or {JSON} (OTLP/HTTP), not {ctype or 'missing'!r}"
        )
    if not isinstance(req, dict) or not isinstance(req.get("resourceSpans", []), list):
        raise GatewayError(400, "the body must be an ExportTraceServiceRequest ({'resourceSpans': [...]})")
    stats = ImportStats()
    spans = [s for group in spans_of_request(req, stats).values() for s in group]
    bad = [s for s in spans if not s["id"]]
    if bad or stats.bad_values["span that is not an object"]:
        raise GatewayError(400, "every span needs a spanId (resourceSpans[].scopeSpans[].spans[])")
    return spans


def _inflate(body: bytes, encoding: str, max_bytes: int) -> bytes:
    """A gzip- or deflate-encoded body, never inflated past ``max_bytes`` (a zip bomb is a 413)."""
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "deflate"):
        raise GatewayError(415, f"Content-Encoding {encoding!r} is not supported (gzip, deflate)")
    d = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding == "gzip" else zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_bytes + 1)
    except zlib.error as e:
        raise GatewayError(400, f"the body is not valid {encoding} ({e})") from None
    if len(out) > max_bytes:
        raise GatewayError(413, f"the body inflates past {max_bytes} bytes")
    if not d.eof:
        raise GatewayError(400, f"the {encoding} body is cut short")
    return out


def _from_protobuf(body: bytes) -> dict[str, Any]:
    try:  # opentelemetry-proto comes with the OTLP exporter (requirements.txt)
        from google.protobuf.json_format import MessageToDict
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    except ImportError:  # pragma: no cover - only without opentelemetry-proto
        raise GatewayError(415, f"{PROTOBUF} needs the opentelemetry-proto package; send {JSON}") from None
    msg = ExportTraceServiceRequest()
    try:
        msg.ParseFromString(body)
    except DecodeError as e:
        raise GatewayError(400, f"the body is not an ExportTraceServiceRequest ({e})") from None
    return MessageToDict(msg)


def response_body(content_type: str, rejected: int, message: str) -> bytes:
    """An ``ExportTraceServiceResponse``: empty, or a partial success naming the spans refused."""
    protobuf = content_type.split(";", 1)[0].strip().lower() == PROTOBUF
    if protobuf:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        r = ExportTraceServiceResponse()
        if rejected:
            r.partial_success.rejected_spans = rejected
            r.partial_success.error_message = message
        return r.SerializeToString()
    if not rejected:
        return b"{}"
    return orjson.dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message}})


def error_body(content_type: str, e: GatewayError) -> bytes:
    """An error as OTLP/HTTP says: a ``google.rpc.Status`` in the request's encoding."""
    code = {400: 3, 404: 5, 409: 9, 413: 8, 415: 3, 421: 7, 429: 8}.get(e.status, 2)
    if content_type.split(";", 1)[0].strip().lower() == PROTOBUF:
        try:
            from google.rpc.status_pb2 import Status

            return Status(code=code, message=e.message).SerializeToString()
        except ImportError:  # pragma: no cover - googleapis-common-protos comes with the exporter
            pass
    return orjson.dumps({"code": code, "message": e.message})


# ------------------------------------------------------------------ the merge


@dataclass
class Merge:
    """What merging a run's spans did (``metadata.gateway.otel``)."""

    spans: int = 0
    joined: dict[str, int] = field(default_factory=lambda: {"response_id": 0, "model_and_time": 0})
    llm_not_joined: int = 0
    agents: dict[str, str] = field(default_factory=dict)  # framework agent -> gateway agent
    tools: int = 0
    delegations: int = 0
    edges_skipped: int = 0  # an edge the span times would point backwards
    other_spans: int = 0  # spans of no GenAI kind (HTTP, database, workflow chains...)
    too_deep: int = 0  # spans more than MAX_DEPTH below a root, merged as roots


def _node_name(s: dict[str, Any]) -> str | None:
    """A LangGraph node as OpenInference records it (``graph.node.id``, else the node named in
    ``metadata``): an agent of the graph."""
    a = s["attrs"]
    node = a.get("graph.node.id")
    if not node and isinstance(a.get("metadata"), str) and "langgraph_node" in a["metadata"]:
        try:
            meta = orjson.loads(a["metadata"])
        except orjson.JSONDecodeError:
            meta = None
        node = meta.get("langgraph_node") if isinstance(meta, dict) else None
    return str(node) if node and str(node) not in ("__start__", "__end__") else None


def _is_llm(s: dict[str, Any]) -> bool:
    return operation(s) in LLM_OPS or any(k.startswith("gen_ai.usage.") for k in s["attrs"])


def _model(s: dict[str, Any]) -> str | None:
    a = s["attrs"]
    m = a.get("gen_ai.request.model") or a.get("llm.model_name") or a.get("gen_ai.response.model")
    return str(m) if m else None


def completion_ids(s: dict[str, Any]) -> list[str]:
    """The completion ids an LLM span reports: ``gen_ai.response.id``, else any of the gateway's
    ``chatcmpl-...`` ids in its OpenInference ``output.value``."""
    a = s["attrs"]
    rid = a.get("gen_ai.response.id")
    out = a.get("output.value")
    return ([rid] if isinstance(rid, str) else []) + (
        COMPLETION_ID.findall(out) if isinstance(out, str) else []
    )


def _completion_id(s: dict[str, Any], known: dict[str, Call]) -> str | None:
    return next((c for c in completion_ids(s) if c in known), None)


@dataclass
class _Tool:
    """An open tool span: whose it is, its ``tool_call`` event, how a transfer in it passes
    control, and the events whose work goes into its result."""

    agent: str
    call: str
    mode: str
    into_result: list[str] = field(default_factory=list)


class _Merger:
    def __init__(self, run: GatewayRun, role_of: Any) -> None:
        self.run, self.rec, self.role_of = run, run.rec, role_of
        self.m = Merge()
        self.calls = run.call_log
        self.by_cid = {c.completion_id: c for c in self.calls if c.completion_id}
        self.by_tool_id = {i: c for c in self.calls for i, _ in c.tool_calls if i}
        self.tool_ids_used: set[str] = set()
        self.used: set[str] = set()
        self.span_call: dict[str, Call] = {}
        # agent -> (t, its place in the log, event): in time, and in the order recorded at one time
        self.timeline: dict[str, list[tuple[float, int, str]]] = defaultdict(list)
        for c in self.calls:
            self.timeline[c.agent].append((c.t, self.rec.index_of(c.event), c.event))
        for line in self.timeline.values():
            line.sort()

    def t(self, epoch: float) -> float:
        return max(0.0, round(epoch - self.run.wall0, 6))

    # -------------------------------------------------------------- events in time

    def _note(self, agent: str, eid: str) -> None:
        bisect.insort(self.timeline[agent], (self.rec.event(eid).t, self.rec.index_of(eid), eid))

    def before(self, agent: str, t: float) -> str | None:
        """The agent's last event at or before ``t``."""
        line = self.timeline.get(agent, [])
        i = bisect.bisect_right(line, (t, END))
        return line[i - 1][2] if i else None

    def after(self, agent: str, t: float, until: float | None = None, *, strict: bool = True) -> str | None:
        """The agent's first event after ``t`` (at or after, not ``strict``), at or before ``until``.
        Strictly after, an event and what comes next can never be the same moment's two ends of
        a cycle (spans of a coarse clock share their times)."""
        line = self.timeline.get(agent, [])
        i = bisect.bisect_right(line, (t, END)) if strict else bisect.bisect_left(line, (t, -1))
        if i < len(line) and (until is None or line[i][0] <= until):
            return line[i][2]
        return None

    def edge(self, src: str | None, dst: str | None, type: str = "causal") -> None:
        if src is None or dst is None or src == dst:
            return
        ts, td = self.rec.event(src).t, self.rec.event(dst).t
        if ts > td or (ts == td and self.rec.index_of(src) > self.rec.index_of(dst)):
            # back in time; or at one time against the order recorded, where it could close a
            # cycle (every other edge of one time goes forward in that order)
            self.m.edges_skipped += 1
            return
        self.rec.edge(src, dst, type)

    def ensure(self, agent: str, t: float, spawner: str) -> bool:
        """The agent is known to the run by time ``t``; True when it was spawned here (by ``spawner``)."""
        if agent in self.run.agents or agent == ROOT_AGENT:
            return False
        self.ensure(spawner, t, ROOT_AGENT)
        sid = self.rec.spawn(
            agent,
            role=self.role_of(agent),
            parent=spawner,
            chain=False,
            after=self.before(spawner, t),
            at=(t, None),
            attrs={"source": "otel"},
        )
        self.run.agents[agent] = AgentState(self.role_of(agent), sid, sid, parent=spawner)
        self._note(agent, sid)
        return True

    def emit(self, type: str, agent: str, t: float, t_end: float | None = None, **kw: Any) -> str:
        spawned = self.run.agents.get(agent)
        if spawned is not None:  # an agent acts from its spawn on (the gateway spawns at its first call)
            t0 = self.rec.event(spawned.spawn).t
            t, t_end = max(t, t0), None if t_end is None else max(t_end, t0)
        kw.setdefault("chain", False)
        attrs = {"source": "otel", **kw.pop("attrs", {})}
        eid = self.rec.emit(type, agent, at=(t, t_end), attrs=attrs, **kw)
        self._note(agent, eid)
        return eid

    # -------------------------------------------------------------- the spans

    def merge(self, spans: list[dict[str, Any]]) -> Merge:
        self.m.spans = len(spans)
        for s in spans:
            normalize(s)
            s["start"] = s["start"] if s["start"] is not None else (s["end"] or self.run.wall0)
            s["end"] = max(s["end"], s["start"]) if s["end"] is not None else s["start"]  # none reversed
        by_id = {s["id"]: s for s in spans}
        self.children: dict[str, list[dict[str, Any]]] = defaultdict(list)
        roots = []
        for s in sorted(spans, key=lambda s: (s["start"], s["end"])):
            if s["parent"] and s["parent"] in by_id and s["parent"] != s["id"]:
                self.children[s["parent"]].append(s)
            else:
                roots.append(s)
        for s in sorted((s for s in spans if _is_llm(s)), key=lambda s: s["start"]):
            self.join(s)
        self.named: set[int] = set()
        for r in roots:
            self.name_agents(r)
        self.seen: set[int] = set()
        self.handed: set[tuple[str, str]] = set()  # (caller, callee) of the invocations recorded
        for r in roots:
            self.visit(r, None, None)
        # a span under a parent cycle, or too deep, was not reached from a root: as a root
        for s in sorted(spans, key=lambda s: s["start"]):
            self.visit(s, None, None)
        return self.m

    def join(self, s: dict[str, Any]) -> None:
        cid = _completion_id(s, self.by_cid)
        if cid is not None and self.by_cid[cid].event not in self.used:
            self.used.add(self.by_cid[cid].event)
            self.span_call[s["id"]] = self.by_cid[cid]
            self.m.joined["response_id"] += 1
            return
        model = _model(s)
        t0, t1 = self.t(s["start"]) - SLACK, self.t(s["end"]) + SLACK
        for c in self.calls:
            if c.agent == model and c.event not in self.used and t0 <= c.t and c.t_end <= t1:
                self.used.add(c.event)
                self.span_call[s["id"]] = c
                self.m.joined["model_and_time"] += 1
                return

    def name_agents(self, s: dict[str, Any], depth: int = 0) -> str | None:
        """Map each framework agent (or LangGraph node) to the gateway agent of the first joined
        call under its span; returns that agent for the span's own caller to see, if any."""
        if id(s) in self.named or depth > MAX_DEPTH:  # a parent cycle stops here
            return None
        self.named.add(id(s))
        own = self.span_call.get(s["id"])
        first = own.agent if own is not None else None
        for c in self.children.get(s["id"], ()):
            below = self.name_agents(c, depth + 1)
            first = first or below
        name = agent_name(s) or _node_name(s)
        if name is None:
            return first
        if first is not None:
            self.m.agents.setdefault(name, first)
        return None  # an agent's calls do not name the agent that invoked it

    def framework_agent(self, s: dict[str, Any]) -> str | None:
        """The agent a span is: an ``invoke_agent`` / AGENT span's, or a LangGraph node's when the
        node made gateway calls (a tool node or a router is not an agent)."""
        name = agent_name(s)
        if name is not None:
            return name
        node = _node_name(s)
        return node if node is not None and node in self.m.agents else None

    def agent_of(self, name: str) -> str:
        return self.m.agents.get(name) or self.run.sdk_agent.get(name) or name

    def visit(self, s: dict[str, Any], agent: str | None, tool: _Tool | None, depth: int = 0) -> None:
        """``agent``: the gateway agent whose span encloses ``s``; ``tool``: the tool span it is in."""
        if id(s) in self.seen:
            return
        if depth > MAX_DEPTH:
            self.m.too_deep += 1
            return
        self.seen.add(id(s))
        name = self.framework_agent(s)
        if name is not None:
            self.visit_agent(s, self.agent_of(name), agent, tool, depth)
        elif operation(s) == "execute_tool":
            self.visit_tool(s, agent, depth)
        else:
            if _is_llm(s) and s["id"] not in self.span_call:
                self.llm_not_joined(s, agent or ROOT_AGENT)
            elif not _is_llm(s):
                self.m.other_spans += 1
            for c in self.children.get(s["id"], ()):
                self.visit(c, agent, tool, depth + 1)

    def visit_agent(
        self, s: dict[str, Any], me: str, enclosing: str | None, tool: _Tool | None, depth: int
    ) -> None:
        a = s["attrs"]
        t0, t1 = self.t(s["start"]), self.t(s["end"])
        if str(a.get("gen_ai.caller.type") or "agent") != "agent":
            caller: str | None = ROOT_AGENT  # a workflow or a program invoked it
        else:
            named = caller_of(s, None)
            caller = self.agent_of(named) if named is not None else enclosing
        via = tool if tool is not None and tool.agent == caller else None
        invoked = None
        if via is None and (caller, me) in self.handed:  # a tool span of the caller's said it
            self.handed.discard((caller, me))  # (gen_ai.transfer.target.name): recorded there
        elif caller is not None and caller != me:
            invoked = self.invoke(caller, me, t0, t1, via.mode if via else "return_to_caller", via)
        else:
            self.ensure(me, t0, ROOT_AGENT)
        for c in self.children.get(s["id"], ()):
            self.visit(c, me, None, depth + 1)
        if invoked is not None and (via is None or via.mode != "pass_control"):
            self.give_back(caller or ROOT_AGENT, me, s, t1, invoked, via)

    def visit_tool(self, s: dict[str, Any], agent: str | None, depth: int) -> None:
        a = s["attrs"]
        t0, t1 = self.t(s["start"]), self.t(s["end"])
        tool_name, call_id = tool_of(s)
        asked, call_id = self.asked_for(s, tool_name, call_id, t0)
        who = asked.agent if asked is not None else agent or ROOT_AGENT
        self.ensure(who, t0, ROOT_AGENT)
        src = asked.event if asked is not None else self.before(who, t0)
        call = self.emit(
            "tool_call",
            who,
            t0,
            tool=tool_name,
            call_id=call_id,
            content=self.run.content_of(_text(a.get("gen_ai.tool.call.arguments", a.get("input.value")))),
            attrs={"span_id": s["id"]},
        )
        self.edge(src, call)
        self.m.tools += 1
        transfer = transfer_of(s)
        here = _Tool(who, call, transfer[1] if transfer is not None else "return_to_caller")
        if transfer is not None:
            target = transfer[0]
            nested = any(self.framework_agent(c) == target for c in self._descendants(s))
            callee = self.agent_of(target)
            if not nested and callee != who:  # its own span is elsewhere (or not exported): the tool says it
                self.handed.add((who, callee))
                invoked = self.invoke(who, callee, t0, t1, here.mode, here)
                if here.mode != "pass_control":
                    self.give_back(who, callee, s, t1, invoked, here)
        for c in self.children.get(s["id"], ()):
            self.visit(c, who, here, depth + 1)
        result = self.emit(
            "tool_result",
            who,
            t1,
            tool=tool_name,
            call_id=call_id,
            status="error" if is_error(s) else None,
            content=self.run.content_of(_text(a.get("gen_ai.tool.call.result", a.get("output.value")))),
            attrs={"span_id": s["id"]},
            after=call,
        )
        for e in here.into_result:
            self.edge(e, result, "return" if self.rec.event(e).type == "return" else "message")
        self.edge(result, self.after(who, t1))

    def asked_for(self, s: dict[str, Any], name: str, call_id: str, t0: float) -> tuple[Call | None, str]:
        """The gateway call whose completion asked for this tool (and the tool call's id): by the
        id (``gen_ai.tool.call.id``, or a LangChain ToolMessage's ``tool_call_id`` in
        ``output.value``), else the latest call before the span that asked for a tool of this name
        and whose request for it no other tool span took."""
        ids = [call_id]
        out = s["attrs"].get("output.value")
        if isinstance(out, str):
            ids += TOOL_CALL_ID.findall(out)
        for i in ids:
            if i in self.by_tool_id:
                self.tool_ids_used.add(i)
                return self.by_tool_id[i], i
        for c in sorted(self.calls, key=lambda c: c.t_end, reverse=True):
            if c.t_end > t0 + SLACK:
                continue
            for i, n in c.tool_calls:
                key = i or f"{c.event}:{n}"
                if n == name and key not in self.tool_ids_used:
                    self.tool_ids_used.add(key)
                    return c, i or call_id
        return None, call_id

    def llm_not_joined(self, s: dict[str, Any], who: str) -> None:
        """A model call the gateway did not answer (another provider): the importer's llm_call."""
        a = s["attrs"]
        t0, t1 = self.t(s["start"]), self.t(s["end"])
        self.m.llm_not_joined += 1
        self.ensure(who, t0, ROOT_AGENT)
        tin, tout = usage(a, ImportStats())
        src = self.before(who, t0)
        eid = self.emit(
            "orchestrator_decision",
            who,
            t0,
            t1,
            model=_model(s),
            tokens_in=tin,
            tokens_out=tout,
            status="error" if is_error(s) else None,
            attrs={"kind": "llm_call", "span_id": s["id"], "joined": False},
        )
        self.edge(src, eid)

    def _descendants(self, s: dict[str, Any]) -> list[dict[str, Any]]:
        out, todo = [], list(self.children.get(s["id"], ()))
        while todo and len(out) < 100_000:
            c = todo.pop()
            out.append(c)
            todo.extend(self.children.get(c["id"], ()))
        return out

    def invoke(
        self, caller: str, callee: str, t0: float, t1: float, mode: str, via: _Tool | None
    ) -> tuple[str, bool]:
        """``caller`` invokes ``callee`` at ``t0`` (from its tool call ``via``, if any): a spawn if the
        callee has not acted yet, else a ``message`` into its first event of the invocation.
        Returns (the invoking event, whether it is a spawn)."""
        self.ensure(caller, t0, ROOT_AGENT)
        self.m.delegations += 1
        src = via.call if via is not None else self.before(caller, t0)
        if self.ensure(callee, t0, caller):
            sid = self.run.agents[callee].spawn
            self.edge(src, sid)
            return sid, True
        mid = self.emit(
            "message", caller, t0, from_=caller, to=callee, after=src, edge_type="causal",
            attrs={"kind": "handoff" if mode == "pass_control" else "delegation", "mode": mode},
        )  # fmt: skip
        # control passed: the callee's next event, whenever; else its first within the invocation
        until = None if mode == "pass_control" else t1 + SLACK
        self.edge(mid, self.after(callee, t0, until, strict=False), "message")
        return mid, False

    def give_back(
        self,
        caller: str,
        callee: str,
        s: dict[str, Any],
        t1: float,
        invoked: tuple[str, bool],
        via: _Tool | None,
    ) -> None:
        """The callee's work goes back to its caller at the span's end: a ``return`` to a caller
        that spawned it, else a ``message``; into the tool's result, or the caller's next event."""
        last = self.before(callee, t1 + SLACK)
        if invoked[1]:
            eid = self.emit(
                "return", callee, t1, from_=callee, to=caller, after=last,
                status="error" if is_error(s) else None, attrs={"span_id": s["id"]},
            )  # fmt: skip
        else:
            eid = self.emit(
                "message", callee, t1, from_=callee, to=caller, after=last, edge_type="message",
                attrs={"kind": "result", "span_id": s["id"]},
            )  # fmt: skip
        if via is not None:
            via.into_result.append(eid)
        else:
            self.edge(eid, self.after(caller, t1))


def _text(value: Any) -> str | None:
    return None if value is None else as_text(value)


def merge_spans(run: GatewayRun, spans: list[dict[str, Any]], role_of: Any) -> Merge:
    """Merge a run's spans into its trace (once, as the run ends)."""
    return _Merger(run, role_of).merge(spans)
