"""opencode sessions (``storage/session/<project>/<session>.json`` + ``message/`` + ``part/``).

opencode stores one JSON file per session, per message (``message/<session>/<msg>.json``) and per
message part (``part/<msg>/<part>.json``). A session file is the entry point; its messages and
parts are read from the same storage root. ``user`` messages -> ``human_intervention``;
assistant ``text`` parts -> ``message`` to the user, ``reasoning`` parts ->
``orchestrator_decision``, ``tool`` parts -> ``tool_call``/``tool_result`` (state error ->
status error); a ``task`` tool call whose child session (``parentID``) is in the storage ->
``spawn`` with the child's events under it and a ``return``. Tokens (input + cache read/write,
output + reasoning) and ``cost`` go on the assistant message's first event.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import LoadError
from .reading import head_bytes, require_nonempty, without_bom
from .staging import ImportStaging
from .values import as_count, as_obj

NAME = "opencode"
DESCRIPTION = "opencode storage sessions (session/<project>/<id>.json with message/ and part/)"
USER = "user"


def sniff(path: str | os.PathLike[str]) -> bool:
    p = Path(path)
    if p.suffix != ".json" or p.parent.parent.name != "session":
        return False
    head = head_bytes(p, 4096)
    return b'"projectID"' in head and b'"time"' in head


def _files(base: Path, name: str) -> list[Path]:
    """The .json files of the storage folder ``base/name`` (``name`` is an id from the log);
    none when the id is no plain folder name (a path, ``..``, too long, a NUL byte), so a
    log cannot send the importer outside its storage."""
    if name in ("", ".", "..") or "/" in name or "\\" in name:
        return []
    try:
        return sorted((base / name).glob("*.json"))
    except (OSError, ValueError):
        return []


def _json(path: Path) -> dict[str, Any] | None:
    try:
        d = orjson.loads(without_bom(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError):
        return None
    return d if isinstance(d, dict) else None


def _root(session_file: Path) -> Path:
    return session_file.parent.parent.parent  # storage/session/<project>/<id>.json


def _sessions(root: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    out = {}
    for f in sorted((root / "session").glob("*/*.json")):
        d = _json(f)
        if d and isinstance(d.get("id"), str):
            out[d["id"]] = (f, d)
    return out


def covered(path: str | os.PathLike[str]) -> bool:
    """A child session (``parentID``) whose parent is in the same storage is imported with it."""
    d = _json(Path(path)) or {}
    parent = d.get("parentID")
    return isinstance(parent, str) and parent in _sessions(_root(Path(path)))


def _ms(v: Any) -> float | None:
    return v / 1000.0 if isinstance(v, int | float) and not isinstance(v, bool) else None


class _Session:
    def __init__(self, b: ImportStaging, root: Path) -> None:
        self.b = b
        self.root = root
        self.children: dict[str, list[str]] = {}
        for sid, (_, d) in _sessions(root).items():
            if isinstance(d.get("parentID"), str):
                self.children.setdefault(d["parentID"], []).append(sid)
        self.n = 0

    def run(self, sid: str, agent: str, parent: str | None) -> None:
        b = self.b
        kids = list(self.children.get(sid, []))
        for mf in _files(self.root / "message", sid):
            m = _json(mf)
            if m is None:
                b.stats.unknown["unreadable message file"] += 1
                continue
            role = m.get("role")
            b.stats.records[f"message/{role}"] += 1
            times = as_obj(m.get("time"))
            t0, t1 = _ms(times.get("created")), _ms(times.get("completed"))
            parts = [p for f in _files(self.root / "part", str(m.get("id"))) if (p := _json(f))]
            if role == "user":
                text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")
                if parent is None:
                    b.add(
                        "human_intervention",
                        USER,
                        t0,
                        to=agent,
                        content=text,
                        attrs={"kind": "prompt", "message_id": m.get("id")},
                    )
                else:
                    b.add(
                        "message",
                        parent,
                        t0,
                        chain=False,
                        to=agent,
                        content=text,
                        attrs={"kind": "prompt", "message_id": m.get("id")},
                    )
            elif role == "assistant":
                self._assistant(m, parts, agent, t0, t1, kids)
            else:
                b.stats.unknown[f"role {role}"] += 1

    def _assistant(
        self, m: dict, parts: list[dict], agent: str, t0: float | None, t1: float | None, kids: list[str]
    ) -> None:
        b = self.b
        model = m.get("modelID") if isinstance(m.get("modelID"), str) else None
        first: int | None = None
        for p in parts:
            ty = p.get("type")
            b.stats.records[f"part/{ty}"] += 1
            pt = as_obj(p.get("time"))
            ts = _ms(pt.get("start")) or t0
            i: int | None = None
            if ty == "text" and str(p.get("text", "")).strip():
                i = b.add(
                    "message",
                    agent,
                    ts,
                    to=USER if agent == "opencode" else None,
                    model=model,
                    content=p.get("text"),
                    attrs={"kind": "text"},
                )
            elif ty == "reasoning":
                i = b.add(
                    "orchestrator_decision",
                    agent,
                    ts,
                    model=model,
                    content=p.get("text"),
                    attrs={"kind": "reasoning"},
                )
            elif ty == "tool":
                i = self._tool(p, agent, ts, t1, model, kids)
            elif ty not in ("step-start", "step-finish", "snapshot", "patch"):
                b.stats.unknown[f"part {ty}"] += 1
            if first is None:
                first = i
        tok = m.get("tokens")
        if isinstance(tok, dict):
            if first is None:
                first = b.add("message", agent, t0, model=model, attrs={"kind": "empty"})
            cache = as_obj(tok.get("cache"))
            ev = b.events[first]
            st = b.stats
            ev.tokens_in = (
                as_count(tok.get("input"), st, "input")
                + as_count(cache.get("read"), st, "cache.read")
                + as_count(cache.get("write"), st, "cache.write")
            )
            ev.tokens_out = as_count(tok.get("output"), st, "output") + as_count(
                tok.get("reasoning"), st, "reasoning"
            )
            if isinstance(m.get("cost"), int | float):
                ev.cost_usd = float(m["cost"])

    def _tool(
        self, p: dict, agent: str, ts: float | None, t1: float | None, model: str | None, kids: list[str]
    ) -> int:
        b = self.b
        state = as_obj(p.get("state"))
        st = as_obj(state.get("time"))
        start, end = _ms(st.get("start")) or ts, _ms(st.get("end")) or t1
        cid = str(p.get("callID") or p.get("id"))
        name = str(p.get("tool") or "tool")
        status = "error" if state.get("status") == "error" else "ok"
        if name == "task" and kids:  # a sub-agent session
            child_sid = kids.pop(0)
            self.n += 1
            label = f"subagent-{self.n}"
            inp = state.get("input") if isinstance(state.get("input"), dict) else {}
            i = b.spawn(
                agent,
                label,
                start,
                tool=name,
                call_id=cid,
                model=model,
                role=inp.get("subagent_type"),
                content=inp.get("prompt"),
                attrs={"session_id": child_sid},
            )
            self.run(child_sid, label, agent)
            b.ret(label, end, status=status, content=state.get("output"), attrs={"session_id": child_sid})
            return i
        i = b.tool_call(agent, start, name, cid, model=model, content=state.get("input"))
        b.tool_result(agent, end, name, cid, status=status, content=state.get("output") or state.get("error"))
        return i


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    d = _json(p)
    if d is None or not isinstance(d.get("id"), str):
        raise LoadError("OT003", "not an opencode session file", path=str(p))
    b = ImportStaging(keep_content=keep_content)
    s = _Session(b, _root(p))
    s.run(d["id"], "opencode", None)
    if not b.events:
        raise LoadError("OT006", "session has no messages in the storage", path=str(p))
    times = as_obj(d.get("time"))
    meta = {
        "source_format": NAME,
        "source": str(p),
        "session_id": d["id"],
        "project_id": d.get("projectID"),
        "version": d.get("version"),
    }
    yield b.build(
        trace_id=f"opencode:{d['id']}",
        task_id=d["id"],
        system="opencode",
        topology="centralized" if s.n else "harness",
        metadata=meta,
        t0=_ms(times.get("created")),
    )
