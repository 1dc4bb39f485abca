"""OpenAI Agents SDK traces: a live tracing processor and an importer of exported spans.

The SDK exports ``{"object": "trace", ...}`` and ``{"object": "trace.span", ...}`` items (what
its backend exporter uploads as ``{"data": [...]}``). Mapping:

- ``agent`` span -> the agent's lifetime; an agent span nested under another agent's span
  (agents as tools) -> ``spawn`` at its start and ``return`` at its end;
- ``handoff`` span -> delegation: a ``spawn`` of the target agent by the source agent when the
  target has not acted yet, else a ``message`` (``attrs.kind = "handoff"``);
- ``generation`` / ``response`` span -> ``orchestrator_decision`` (``kind = "llm_call"``) with
  model and usage (``input_tokens``/``output_tokens``, or prompt/completion);
- ``function`` span -> ``tool_call`` at start, ``tool_result`` at end (span error -> status error);
- ``guardrail`` span that tripped -> ``safety_event``; untripped guardrails are counted only;
- ``custom`` task/turn spans carry run totals and are counted, not imported (no double counting).

Live runs are recorded by ``agents_processor.OrchestraceProcessor`` (kept apart: importing the SDK
takes seconds, and format detection imports this module for every ``.json`` file):
``agents.add_trace_processor(OrchestraceProcessor("runs.jsonl"))``.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..core.errors import LoadError
from ..core.model import Trace
from ..core.read import parse_json
from .reading import ImportStats, head_bytes, iter_jsonl, require_nonempty
from .redact import redact
from .staging import ImportStaging
from .values import as_int, as_obj, ts_of

NAME = "openai-agents"
DESCRIPTION = "OpenAI Agents SDK exported traces/spans (JSON {data: [...]} or JSONL of items)"


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    if not p.endswith((".json", ".jsonl")):
        return False
    head = head_bytes(p, 4096)
    return b'"trace.span"' in head or (b'"object"' in head and b'"workflow_name"' in head)


def _items(p: Path, stats: ImportStats) -> list[dict[str, Any]]:
    if p.suffix == ".jsonl":
        out = []
        for _, r in iter_jsonl(p, stats):
            if isinstance(r, dict) and isinstance(r.get("data"), list):
                out.extend(x for x in r["data"] if isinstance(x, dict))
            elif isinstance(r, dict):
                out.append(r)
        return out
    d = parse_json(p.read_bytes(), path=str(p))  # says "truncated" for a cut-off file
    if isinstance(d, dict) and isinstance(d.get("data"), list):
        d = d["data"]
    return [x for x in d if isinstance(x, dict)] if isinstance(d, list) else [d]


def _usage(u: Any) -> tuple[int | None, int | None]:
    if not isinstance(u, dict):
        return None, None
    tin = u.get("input_tokens", u.get("prompt_tokens"))
    tout = u.get("output_tokens", u.get("completion_tokens"))
    return as_int(tin), as_int(tout)


def convert(
    items: list[dict[str, Any]], *, keep_content: bool = False, source: str | None = None
) -> list[Trace]:
    """Traces from exported SDK items (traces and spans, any order, several traces allowed)."""
    stats = ImportStats()
    heads: dict[str, dict[str, Any]] = {}
    spans: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for it in items:
        if not isinstance(it, dict):
            stats.bad_values["item that is not an object"] += 1
            continue
        obj = it.get("object")
        if obj == "trace":
            heads[str(it.get("id"))] = it
        elif obj == "trace.span":
            spans[str(it.get("trace_id"))].append(it)
        else:
            stats.unknown[f"object {obj}"] += 1
    out = []
    for tid in list(dict.fromkeys([*heads, *spans])):
        b = ImportStaging(keep_content=keep_content)
        b.stats = stats
        _build(spans.get(tid, []), b)
        if not b.events:
            stats.notes.append(f"trace {tid}: no agent, generation, function, handoff or guardrail spans")
            continue
        head = heads.get(tid, {})
        meta: dict[str, Any] = {"source_format": NAME, "openai_trace_id": tid}
        if source:
            meta["source"] = source
        for k in ("workflow_name", "group_id", "metadata"):
            if head.get(k) is not None:
                meta[k] = head[k]
        spawned = any(e.type == "spawn" for e in b.events)
        starts = [t for x in spans.get(tid, []) if (t := ts_of(x.get("started_at"))) is not None]
        out.append(
            b.build(
                trace_id=f"openai-agents:{tid}",
                task_id=str(head.get("workflow_name") or tid),
                system="openai-agents",
                topology="centralized" if spawned else "unknown",
                metadata=meta,
                t0=min(starts) if starts else None,
            )
        )
    return out


def _build(spans: list[dict[str, Any]], b: ImportStaging) -> None:
    by_id = {s["id"]: s for s in spans if isinstance(s.get("id"), str)}
    kids: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    roots = []
    for s in sorted(spans, key=lambda s: ts_of(s.get("started_at")) or 0.0):
        parent = s.get("parent_id")
        (kids[parent] if isinstance(parent, str) and parent in by_id else roots).append(s)
    acted: set[str] = set()

    def act(agent: str) -> str:
        acted.add(agent)
        return agent

    def visit(s: dict[str, Any], agent: str | None) -> None:
        d = as_obj(s.get("span_data"))
        ty = d.get("type")
        t0, t1 = ts_of(s.get("started_at")), ts_of(s.get("ended_at"))
        err = s.get("error")
        status = "error" if err else "ok"
        attrs: dict[str, Any] = {"span_id": s.get("id")}
        if err:
            msg = err.get("message") if isinstance(err, dict) else str(err)
            # kept without --keep-content too (a short diagnosis), so always redacted
            attrs["error"] = redact(msg) if isinstance(msg, str) else msg
        me = agent
        nested_agent = False
        after: tuple | None = None  # a tool result comes after what the tool did
        if ty == "agent":
            me = str(d.get("name") or "agent")
            if agent is not None and agent != me and me not in acted:
                b.spawn(act(agent), me, t0, attrs={**attrs, "kind": "agent_as_tool"})
                nested_agent = True
            act(me)
        elif ty in ("generation", "response"):
            tin, tout = _usage(d.get("usage"))
            b.add(
                "orchestrator_decision", act(agent or "llm"), t0, t_end=t1, model=d.get("model"),
                tokens_in=tin, tokens_out=tout, status=status if err else None,
                content=d.get("output"), attrs={**attrs, "kind": "llm_call", "span_type": ty},
            )  # fmt: skip
        elif ty == "function":
            who = act(agent or "agent")
            cid = str(s.get("id"))
            name = str(d.get("name") or "function")
            b.tool_call(who, t0, name, cid, content=d.get("input"), attrs=dict(attrs))
            after = (who, t1, name, cid, status, d.get("output"), attrs)
        elif ty == "handoff":
            src = str(d.get("from_agent") or agent or "agent")
            dst = d.get("to_agent")
            attrs["kind"] = "handoff"
            if isinstance(dst, str) and dst not in acted and not b.is_spawned(dst):
                b.spawn(act(src), dst, t0, status=status, attrs=attrs)
            else:
                b.add("message", act(src), t0, to=dst, status=status, attrs=attrs)
        elif ty == "guardrail":
            if d.get("triggered"):
                b.add(
                    "safety_event",
                    act(agent or "guardrail"),
                    t0,
                    t_end=t1,
                    attrs={**attrs, "kind": "guardrail_tripwire", "guardrail": d.get("name")},
                )
            else:
                b.stats.records["guardrail passed"] += 1
        elif ty == "custom":
            b.stats.records[f"custom {d.get('name')}"] += 1
        else:
            b.stats.unknown[f"span {ty}"] += 1
        for c in kids.get(s["id"], ()) if isinstance(s.get("id"), str) else ():
            visit(c, me)
        if nested_agent:
            b.ret(me, t1, status=status, attrs={"span_id": s.get("id")})
        if after is not None:
            who, t_end, name, cid, st, output, at = after
            b.tool_result(who, t_end, name, cid, status=st, content=output, attrs=dict(at))

    for r in roots:
        visit(r, None)


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    stats = ImportStats()
    items = _items(p, stats)
    traces = convert(items, keep_content=keep_content, source=str(p))
    if not traces:
        raise LoadError("OT006", "no Agents SDK spans that map to events", path=str(p))
    yield from traces
