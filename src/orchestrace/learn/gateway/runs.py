"""Recording gateway calls: one orchestration trace (and call cache) per run, written as calls happen.

A run is what one execution of the user's team is: every call names its run (a run-scoped base
URL or a header) and its agent (the ``model`` field or a header). The trace is built by the
runtime's :class:`Recorder` (over ``core.build.TraceBuilder``) in the shape the ``team`` program
records, so ``train team`` reads both alike:

- an agent's first call: ``spawn`` of it by the root agent (``orchestrator``: the user's program);
- each call: a ``message`` from the root to the agent (the call's newest input) and the agent's
  ``return`` (its completion) with ``attrs.call`` = the call cache reference (``key#n``), whose
  entry holds the token ids, the behaviour log-probs and the adapter, and ``attrs.adapter``;
- data flow: when the prompt of a call contains an earlier completion of another agent of the same
  run (verbatim, or after lower-casing and collapsing whitespace, as a whole word sequence), a
  ``message`` edge from that completion's ``return`` to the call's ``return``
  (``attrs.data_flow`` says how each was found); a completion's text and each string in its tool
  calls' arguments count (a structured output or a delegation passes its content there);
- the end of the run: an ``aggregate`` of the answer (the program's, or the last completion), a
  ``stop`` decision, a ``despawn`` of every agent, ``metadata.outcome``.

Content (prompts' newest input, completions) goes into the trace with secrets redacted (the
importers' ``--keep-content`` rule) unless ``keep_content`` is off; the call cache holds the
full requests and token ids (the training data). Nothing else writes content anywhere.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import orjson

from ...importers.redact import redact
from ...runtime.backends.base import BackendError, ChatRequest, ChatResponse, normalise, request_key
from ...runtime.cache import CallCache, cache_path
from ...runtime.recorder import ROOT_AGENT, Recorder
from .protocol import CallSpec, Completion, GatewayError
from .replay import ReplayPlan

RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SYSTEM = "orchestrace.gateway"


def _text(value: Any) -> str | None:
    return None if value is None else value if isinstance(value, str) else str(value)


def check_run_id(run_id: str) -> str:
    """A run id becomes a file name: letters, digits, ``.``, ``_``, ``-``, not starting with a dot."""
    if not RUN_ID.fullmatch(run_id):
        raise GatewayError(
            400,
            f"bad run id {run_id[:40]!r}: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit",
        )
    return run_id


def derive_seed(run_seed: int, agent: str, turn: int, asked: int | None = None) -> int:
    """A call's seed from the run's seed, the agent, its call number and the seed the request
    asked for, if any (stable across processes and whatever the other agents do)."""
    mixed = "" if asked is None else f"|{asked}"
    h = hashlib.sha256(f"{run_seed}|{agent}|{turn}{mixed}".encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


def normalised(text: str) -> str:
    return " ".join(text.lower().split())


def _contains(haystack: str, needle: str) -> bool:
    """``needle`` occurs in ``haystack`` not inside a longer word (an answer "no" is not found in
    "know")."""
    if not needle:
        return False
    start = haystack.find(needle)
    while start >= 0:
        end = start + len(needle)
        before_ok = start == 0 or not (haystack[start - 1].isalnum() and needle[0].isalnum())
        after_ok = end == len(haystack) or not (haystack[end].isalnum() and needle[-1].isalnum())
        if before_ok and after_ok:
            return True
        start = haystack.find(needle, start + 1)
    return False


def _strings(value: Any) -> list[str]:
    """The non-blank strings in a JSON value, depth first."""
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def argument_texts(tool_calls: list[dict[str, Any]]) -> list[str]:
    """The strings a completion's tool calls pass on: each string in their JSON arguments (an
    argument that is not JSON, whole). A framework's structured output (pydantic-ai's
    ``final_result`` tool) and an agent delegating to another through a tool put the content
    that later prompts quote there, not in the completion's text."""
    out: list[str] = []
    for c in tool_calls:
        args = (c.get("function") or {}).get("arguments")
        if not isinstance(args, str):
            continue
        try:
            out += _strings(orjson.loads(args))
        except orjson.JSONDecodeError:
            out += _strings(args)
    return out


@dataclass
class AgentState:
    role: str
    spawn: str
    last: str  # its latest event (spawn or return)
    calls: int = 0
    parent: str = ROOT_AGENT  # who spawned it (the root, or the agent whose span invoked it first)


@dataclass(frozen=True)
class Call:
    """A call this run recorded: what a framework's LLM span is joined to (``otel``)."""

    agent: str
    completion_id: str | None  # the id the gateway answered with
    event: str  # its return event
    t: float
    t_end: float
    tool_calls: tuple[tuple[str, str], ...] = ()  # (id, name) of the tools the completion asked for


@dataclass(frozen=True)
class Said:
    """A completion recorded in this run: what data-flow matching looks for in later prompts."""

    event: str
    agent: str
    text: str
    norm: str
    in_tool_call: bool = False  # a string of the completion's tool-call arguments, not its text


@dataclass
class GatewayRun:
    """One run's trace and call cache, open until :meth:`finish`."""

    run_id: str
    path: str
    seed: int = 0
    task_id: str = "gateway"
    trace_id: str = ""  # default: the run id
    metadata: dict[str, Any] = field(default_factory=dict)
    keep_content: bool = True
    own_seeds: bool = False  # the run's seed decides every call's, a request's seed only mixed in
    plan: ReplayPlan | None = None  # a fork of a recorded run (``replay.py``)
    agents: dict[str, AgentState] = field(default_factory=dict)
    said: list[Said] = field(default_factory=list)
    closed: bool = False
    calls: int = 0
    inbox: dict[str, list[dict[str, str]]] = field(default_factory=dict)  # agent -> edges into its next call
    sdk_parent: dict[str, str] = field(default_factory=dict)  # SDK span id -> its parent span id
    sdk_agent_of_span: dict[str, str] = field(default_factory=dict)  # SDK agent span id -> its name
    sdk_agent: dict[str, str] = field(default_factory=dict)  # SDK agent name -> the gateway's agent
    sdk_tool: dict[str, tuple[str, str, str | None]] = field(
        default_factory=dict
    )  # span -> (agent, tool_call, nested)
    call_log: list[Call] = field(default_factory=list)
    otel_spans: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)  # (trace, span) -> span
    otel_bytes: int = 0  # about what otel_spans holds (service.MAX_SPAN_BYTES_PER_RUN)
    completion_ids: set[str] = field(default_factory=set)  # the ids its calls were answered with

    def __post_init__(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.rec = Recorder(
            self.path,
            task_id=self.task_id,
            trace_id=self.trace_id or self.run_id,
            system=SYSTEM,
            metadata={**self.metadata, "gateway": {"run": self.run_id, "seed": self.seed}},
            clock="wall",
        ).open()
        self.cache = CallCache(cache_path(self.path))
        self._occurrence: dict[str, int] = {}
        self.wall0 = time.time() - self.rec.now()  # the Unix time of the trace's t = 0 (span times)

    def content_of(self, text: str | None) -> str | None:
        if not self.keep_content or text is None:
            return None
        return redact(text)

    def _agent(self, agent: str, role: str) -> AgentState:
        st = self.agents.get(agent)
        if st is None:
            sid = self.rec.spawn(agent, role=role, parent=ROOT_AGENT, chain=False)
            st = self.agents[agent] = AgentState(role, sid, sid)
        return st

    def data_flow(self, agent: str, prompt: str) -> list[dict[str, str]]:
        """Earlier completions of other agents found in ``prompt``: the latest one per agent and
        text, each completion once."""
        norm = None
        found: dict[tuple[str, str], dict[str, str]] = {}
        for s in self.said:
            if s.agent == agent or not s.norm:
                continue
            how = None
            if _contains(prompt, s.text.strip()):
                how = "verbatim"
            else:
                norm = norm if norm is not None else normalised(prompt)
                if _contains(norm, s.norm):
                    how = "normalised"
            if how is not None:
                found[(s.agent, s.norm)] = {"from": s.event, "match": how}
        once: dict[str, dict[str, str]] = {}
        for f in found.values():
            once.setdefault(f["from"], f)
        return list(once.values())

    def request(
        self, agent: str, adapter: str, call: CallSpec, temperature: float, max_tokens: int
    ) -> tuple[ChatRequest, int]:
        """The runtime request of a call and the agent's turn. Its seed: the request's, else one
        derived from the run's; with ``own_seeds`` (training: the runs of a group must differ even
        when a framework sends a fixed seed) always derived, the request's mixed in."""
        st = self.agents.get(agent)
        turn = st.calls if st is not None else 0
        if call.seed is not None and not self.own_seeds:
            seed = call.seed
        else:
            seed = derive_seed(self.seed, agent, turn, call.seed)
        return (
            ChatRequest(
                messages=call.messages,
                model=adapter,
                temperature=call.temperature if call.temperature is not None else temperature,
                max_tokens=call.max_tokens if call.max_tokens is not None else max_tokens,
                seed=seed,
                stop=call.stop or None,
            ),
            turn,
        )

    def begin(self, agent: str, role: str, call: CallSpec) -> tuple[str, list[dict[str, str]], float]:
        """Record the call's arrival: (its message event, its data flow, the start time)."""
        st = self._agent(agent, role)
        flows = self.inbox.pop(agent, []) + self.data_flow(agent, call.prompt_text())
        mid = self.rec.message(
            self.content_of(call.messages[-1]["content"]),
            to=agent,
            frm=ROOT_AGENT,
            after=st.last,
            chain=False,
            edge_type="causal",
            attrs={"turn": st.calls},
        )
        st.calls += 1
        self.calls += 1
        return mid, flows, self.rec.now()

    def end(
        self,
        agent: str,
        req: ChatRequest,
        turn: int,
        mid: str,
        flows: list[dict[str, str]],
        start: float,
        out: Completion | BaseException,
        replayed: bool = False,
        completion_id: str | None = None,
    ) -> str:
        """Record the call's outcome: the cache entry and the agent's ``return`` event
        (``replayed``: a fork's call answered from the recording; ``attrs.completion_id``: the id
        the call is answered with, which spans report)."""
        st = self.agents[agent]
        key = request_key(req)
        n = self._occurrence.get(key, 0)
        self._occurrence[key] = n + 1
        ref = f"{key}#{n}"
        base: dict[str, Any] = {
            "from_": agent,
            "to": ROOT_AGENT,
            "role": st.role,
            "turn": turn,
            "start": start,
            "after": mid,
            "chain": False,
        }
        if isinstance(out, BaseException):
            err = (
                out
                if isinstance(out, BackendError)
                else BackendError(
                    "refused" if isinstance(out, GatewayError) else "exception",
                    out.message if isinstance(out, GatewayError) else type(out).__name__,
                )
            )
            self.cache.put(key, n, "chat", normalise(req), {"error": err.to_dict()})
            eid = self.rec.emit(
                "return",
                agent,
                content=str(err),
                status="error",
                attrs={"call": ref, "attempt": 0, "error": err.kind, "retryable": err.retryable},
                **base,
            )
            st.last = eid
            return eid
        resp = ChatResponse(
            text=out.text or "",
            tokens_in=out.tokens_in,
            tokens_out=out.tokens_out,
            model=out.model,
            finish_reason=out.finish_reason,
            tokens=out.token_sample,
        )
        ok = msgspec.to_builtins(resp)
        if out.tool_calls:
            ok["tool_calls"] = out.tool_calls
        self.cache.put(key, n, "chat", normalise(req), {"ok": ok})
        attrs: dict[str, Any] = {"call": ref, "attempt": 0}
        if completion_id is not None:
            attrs["completion_id"] = completion_id
        if out.token_sample is not None:
            attrs["adapter"] = out.token_sample.adapter
        if out.tool_calls:
            attrs["tool_calls"] = [str((c.get("function") or {}).get("name")) for c in out.tool_calls]
        if flows:
            attrs["data_flow"] = flows
        if replayed:
            attrs["replayed"] = True
        shown = out.text if out.text or not out.tool_calls else msgspec.json.encode(out.tool_calls).decode()
        eid = self.rec.emit(
            "return",
            agent,
            content=self.content_of(shown),
            tokens_in=out.tokens_in,
            tokens_out=out.tokens_out,
            model=out.model or None,
            attrs=attrs,
            **base,
        )
        for f in flows:
            self.rec.edge(f["from"], eid, "message")
        st.last = eid
        ev = self.rec.event(eid)
        asked = tuple(
            (str(c.get("id") or ""), str((c.get("function") or {}).get("name") or ""))
            for c in out.tool_calls or ()
            if isinstance(c, dict)
        )
        self.call_log.append(Call(agent, completion_id, eid, ev.t, ev.t_end or ev.t, asked))
        if completion_id is not None:
            self.completion_ids.add(completion_id)
        if out.text:
            self.said.append(Said(eid, agent, out.text, normalised(out.text)))
        for text in argument_texts(out.tool_calls or []):
            self.said.append(Said(eid, agent, text, normalised(text), in_tool_call=True))
        return eid

    def fork_call(self, agent: str, turn: int, req: ChatRequest) -> tuple[ChatRequest, Completion | None]:
        """A fork run's call: the recorded completion, or the request to sample (another seed);
        the forked call is marked by a ``human_intervention`` event, as a runtime fork's is."""
        assert self.plan is not None
        req, recorded, at = self.plan.route(agent, turn, req)
        if at is not None:
            self.rec.intervention(
                f"fork: resample at {at}",
                chain=False,
                after=self.agents[agent].last if agent in self.agents else None,
                attrs={"intervention": "resample", "at": at},
            )
        return req, recorded

    # ------------------------------------------------------------------ framework structure

    def _ancestors(self, span: dict[str, Any]) -> list[str]:
        out: list[str] = []
        p = span.get("parent_id")
        while isinstance(p, str) and p not in out:
            out.append(p)
            p = self.sdk_parent.get(p)
        return out

    def _sdk_owner(self, span: dict[str, Any]) -> str | None:
        """The SDK agent whose run a span is part of (the nearest agent span above it)."""
        return next(
            (self.sdk_agent_of_span[p] for p in self._ancestors(span) if p in self.sdk_agent_of_span), None
        )

    def _sdk_agent(self, span: dict[str, Any]) -> str | None:
        """The gateway agent a span belongs to: its SDK agent, named as that agent's calls name it."""
        name = self._sdk_owner(span)
        return None if name is None else self.sdk_agent.get(name, name)

    def agents_sdk_span(self, phase: str, span: dict[str, Any], role_of: Any) -> None:
        """One OpenAI Agents SDK span as it starts or ends (``span.export()``): tool calls become
        ``tool_call``/``tool_result`` events of the calling agent, handoffs a ``message`` from one
        agent to the other, an agent run as a tool a ``message`` into its calls and a ``return``
        edge from its last call into the tool's result. LLM calls are not taken from the spans:
        the gateway recorded them itself (a generation span only says which agent a model is)."""
        data = span.get("span_data") or {}
        kind, sid = data.get("type"), str(span.get("id"))
        if phase == "start" and isinstance(span.get("parent_id"), str):
            self.sdk_parent[sid] = span["parent_id"]
        if phase == "start" and kind == "agent":
            name = str(data.get("name") or "agent")
            self.sdk_agent_of_span[sid] = name
            # an agent inside another agent's tool call: an agent run as a tool
            tool = next((p for p in self._ancestors(span) if p in self.sdk_tool), None)
            if tool is not None and self.sdk_tool[tool][2] is None:
                caller, call_eid, _ = self.sdk_tool[tool]
                self.sdk_tool[tool] = (caller, call_eid, name)
                agent = self.sdk_agent.get(name, name)
                self.inbox.setdefault(agent, []).append({"from": call_eid, "match": "agent_as_tool"})
        elif phase == "start" and kind in ("generation", "response"):
            owner = self._sdk_owner(span)
            if owner is not None and isinstance(data.get("model"), str):
                self.sdk_agent[owner] = data["model"]
        elif phase == "start" and kind == "function":
            agent = self._sdk_agent(span)
            if agent is None:
                return
            st = self._agent(agent, role_of(agent))
            eid = self.rec.emit(
                "tool_call",
                agent,
                tool=str(data.get("name") or "function"),
                call_id=sid,
                content=self.content_of(_text(data.get("input"))),
                after=st.last,
                chain=False,
                attrs={"source": "openai-agents"},
            )
            st.last = eid
            self.sdk_tool[sid] = (agent, eid, None)
        elif phase == "end" and kind == "function" and sid in self.sdk_tool:
            agent, call_eid, nested = self.sdk_tool.pop(sid)
            st = self.agents[agent]
            after = [call_eid]
            if nested is not None and (inner := self.agents.get(self.sdk_agent.get(nested, nested))):
                after.append(inner.last)
            eid = self.rec.emit(
                "tool_result",
                agent,
                tool=str(data.get("name") or "function"),
                call_id=sid,
                content=self.content_of(_text(data.get("output"))),
                status="error" if span.get("error") else None,
                after=after,
                chain=False,
                attrs={"source": "openai-agents"},
            )
            st.last = eid
        elif phase == "end" and kind == "handoff":
            src, dst = data.get("from_agent"), data.get("to_agent")
            if not isinstance(src, str) or not isinstance(dst, str):
                return
            a, b = self.sdk_agent.get(src, src), self.sdk_agent.get(dst, dst)
            st = self._agent(a, role_of(a))
            eid = self.rec.message(
                None,
                to=b,
                frm=a,
                after=st.last,
                chain=False,
                edge_type="causal",
                attrs={"kind": "handoff", "source": "openai-agents"},
            )
            self.inbox.setdefault(b, []).append({"from": eid, "match": "handoff"})

    def _depth(self, agent: str) -> int:
        """How many spawners lead from the root to ``agent`` (an agent a span spawned under another)."""
        seen: set[str] = set()
        while agent in self.agents and agent not in seen:
            seen.add(agent)
            agent = self.agents[agent].parent
        return len(seen)

    def finish(self, answer: str | None = None, *, error: str | None = None) -> str:
        """Close the run: the answer (the program's, else the last completion) as an ``aggregate``,
        a ``stop``, a ``despawn`` of every agent, the outcome in the metadata. Returns the path."""
        if self.closed:
            return self.path
        self.closed = True
        rec = self.rec
        texts = [s for s in self.said if not s.in_tool_call]
        final = answer if answer is not None else (texts[-1].text if texts else None)
        after: list[str] = []
        if final is not None and self.said:
            want = normalised(final)
            src = next((s for s in reversed(self.said) if want and want in s.norm), self.said[-1])
            after = [src.event]
        last = None
        if final is not None and after:
            last = rec.aggregate(self.content_of(final), inputs=after, agent=ROOT_AGENT, chain=False)
        status = "error" if error is not None else "ok"
        stop = rec.stop(
            "error" if error is not None else "done",
            agent=ROOT_AGENT,
            after=last,
            chain=False,
            **({"status": "error"} if error is not None else {}),
        )
        for name in sorted(self.agents, key=self._depth, reverse=True):  # children before parents:
            st = self.agents[name]  # a parent despawned first would act after its end
            rec.despawn(name, parent=st.parent, after=[stop, st.last], chain=False)
        outcome: dict[str, Any] = {"status": status, "stop_reason": "error" if error else "done"}
        outcome["final"] = self.content_of(final)
        outcome["calls"] = self.calls
        if error is not None:
            outcome["error"] = error
        if self.plan is not None:
            rec.metadata["fork"] = {**rec.metadata.get("fork", {}), **self.plan.summary()}
        rec.metadata["outcome"] = outcome
        rec.close()
        self.cache.close()
        return self.path
