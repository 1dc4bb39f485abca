"""Gemini CLI chat sessions (``~/.gemini/tmp/<project>/chats/session-*.json``) as traces.

A session is one JSON object ``{sessionId, startTime, messages: [...]}`` (some tools store it as
a one-line ``.jsonl``). ``user`` messages -> ``human_intervention``; ``gemini`` messages ->
their ``thoughts`` as ``orchestrator_decision``, their text as a ``message`` to the user and
each of their ``toolCalls`` as a ``tool_call``/``tool_result`` pair (status other than
completed/success -> error); ``tokens`` (input, output, cached) go on the message's last event.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import LoadError
from .reading import head_bytes, require_nonempty, without_bom
from .staging import ImportStaging
from .values import as_count, as_list, ts_of

NAME = "gemini-cli"
DESCRIPTION = "Gemini CLI chat sessions (session-*.json)"
AGENT = "gemini"
USER = "user"


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    if not p.endswith((".json", ".jsonl")):
        return False
    head = head_bytes(p, 4096).lstrip()
    return (
        head.startswith(b"{")
        and b'"sessionId"' in head
        and b'"messages"' in head
        and b'"type":"gemini"' in head.replace(b": ", b":")
    )


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    try:
        data = without_bom(p.read_bytes())
        d = orjson.loads(data.strip().splitlines()[0] if p.suffix == ".jsonl" else data)
    except (orjson.JSONDecodeError, IndexError) as e:
        raise LoadError("OT003", f"not a Gemini CLI session object: {e}", path=str(p)) from None
    msgs = d.get("messages") if isinstance(d, dict) else None
    if not isinstance(msgs, list) or not msgs:
        raise LoadError("OT006", "session has no messages", path=str(p))
    b = ImportStaging(keep_content=keep_content)
    for m in msgs:
        if not isinstance(m, dict):
            b.stats.unknown["non-object message"] += 1
            continue
        ty = m.get("type")
        b.stats.records[str(ty)] += 1
        ts = ts_of(m.get("timestamp"))
        attrs = {"message_id": m.get("id")}
        if ty == "user":
            b.add(
                "human_intervention",
                USER,
                ts,
                to=AGENT,
                content=m.get("content"),
                attrs={**attrs, "kind": "prompt"},
            )
        elif ty == "gemini":
            _gemini(b, m, ts, attrs)
        elif ty in ("info", "error", "warning"):
            b.stats.records[f"{ty} notice"] += 1
        else:
            b.stats.unknown[str(ty)] += 1
    sid = str(d.get("sessionId") or p.stem)
    meta = {"source_format": NAME, "source": str(p), "session_id": sid, "project_hash": d.get("projectHash")}
    yield b.build(
        trace_id=f"gemini-cli:{sid}",
        task_id=sid,
        system="gemini-cli",
        topology="harness",
        metadata=meta,
        t0=ts_of(d.get("startTime")),
    )


def _gemini(b: ImportStaging, m: dict[str, Any], ts: float | None, attrs: dict[str, Any]) -> None:
    model = m.get("model") if isinstance(m.get("model"), str) else None
    last: int | None = None  # tokens go on the message's last event (its action)
    for th in as_list(m.get("thoughts")):
        if isinstance(th, dict):
            i = b.add(
                "orchestrator_decision", AGENT, ts_of(th.get("timestamp")) or ts, model=model,
                content=th.get("summary") or th.get("description"), attrs={**attrs, "kind": "thought", "subject": th.get("subject")},
            )  # fmt: skip
            last = i
    if isinstance(m.get("content"), str) and m["content"].strip():
        last = b.add(
            "message", AGENT, ts, to=USER, model=model, content=m["content"], attrs={**attrs, "kind": "text"}
        )
    for k, call in enumerate(as_list(m.get("toolCalls"))):
        if not isinstance(call, dict):
            continue
        cid = str(call.get("id") or f"{m.get('id')}:{k}")
        name = str(call.get("name") or "tool")
        t_call = ts_of(call.get("timestamp")) or ts
        last = b.tool_call(AGENT, t_call, name, cid, model=model, content=call.get("args"), attrs=dict(attrs))
        status = "ok" if call.get("status") in (None, "completed", "success") else "error"
        b.tool_result(
            AGENT, t_call, name, cid, status=status, content=call.get("result") or call.get("resultDisplay")
        )
    tok = m.get("tokens")
    if isinstance(tok, dict):
        if last is None:
            last = b.add("message", AGENT, ts, to=USER, model=model, attrs={**attrs, "kind": "empty"})
        ev = b.events[last]
        ev.tokens_in = as_count(tok.get("input"), b.stats, "input")
        ev.tokens_out = as_count(tok.get("output"), b.stats, "output") + as_count(
            tok.get("thoughts"), b.stats, "thoughts"
        )
        ev.attrs = {**(ev.attrs or {}), "cached_tokens": as_count(tok.get("cached"), b.stats, "cached")}
