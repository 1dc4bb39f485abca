"""Claude Code sessions (``~/.claude/projects/<project>/<session>.jsonl``) as orchestration traces.

One session file (plus its sub-agent files) is one trace. Mapping:

- ``Task`` / ``Agent`` tool_use -> ``spawn`` by the caller; the sub-agent's own log (old layout
  ``agent-<id>.jsonl`` beside the session, new layout ``<session>/subagents/**/agent-<id>.jsonl``,
  or ``isSidechain`` records inside the session file of 1.0.x versions) hangs under that spawn;
  the tool_result of the spawn call -> ``return`` from the sub-agent to its spawner (for
  background agents, the later ``<task-notification>``). Sub-agent files that no call claims
  (warm-up agents, workflows) get a spawn marked ``attrs.synthetic``.
- ``SendMessage`` -> ``message``; ``<teammate-message>`` blocks -> messages from the teammate.
- ``TaskCreate``/``TaskUpdate``/``TodoWrite``/``TeamCreate``/``TeamDelete``/plan-mode tools and
  thinking blocks -> ``orchestrator_decision``.
- other tool_use/tool_result -> ``tool_call``/``tool_result`` (``is_error`` -> status error).
- trust (``trusted``, for the safety metrics): a user's prompt is trusted; a tool result is
  untrusted (content the agent did not write) unless the tool only reports the agent's own action
  (``Edit``, ``Write``, ``TodoWrite``, ...: see ``OWN_ACTION_TOOLS``). Results that come from
  outside the machine are also marked ``attrs.external``: ``WebFetch``, ``WebSearch``, every MCP
  tool (``mcp__*``) and ``Bash`` commands that reach the network (``curl``, ``wget``, ``gh``,
  ``git clone/pull/fetch``, ``ssh``, ...: see ``external``).
- assistant text -> ``message`` (to ``user`` for the main agent); user prompts -> ``human_intervention``.
- ``usage`` -> tokens on the last event of each API message (the action the call produced, so a
  call ending in a Bash tool_use is task work and one ending in a spawn is coordination):
  ``tokens_in`` = input + cache creation + cache read, ``tokens_out`` = output. Streaming writes
  one record per content block with a growing usage, so each message counts once, with its
  largest value per field.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from functools import lru_cache
from itertools import islice
from operator import attrgetter
from pathlib import Path
from typing import Any

from ..core.errors import LoadError
from ..core.limits import INT64_MAX
from ..core.read import parse_json
from .reading import ImportStats, first_json_lines, iter_head_json, iter_jsonl, require_nonempty
from .redact import redact
from .staging import ImportStaging
from .values import as_count, as_list, as_text, ts_of

NAME = "claude-code"
DESCRIPTION = "Claude Code session logs (~/.claude/projects/**/*.jsonl), both sub-agent layouts"

SPAWN_TOOLS = frozenset({"Task", "Agent"})
MESSAGE_TOOLS = frozenset({"SendMessage"})
DECISION_TOOLS = frozenset(
    {"TaskCreate", "TaskUpdate", "TodoWrite", "TeamCreate", "TeamDelete", "EnterPlanMode", "ExitPlanMode"}
)
#: record types that carry no agent action (bookkeeping of the CLI); counted, not imported
BOOKKEEPING = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "permission-mode",
        "last-prompt",
        "attachment",
        "system",
        "custom-title",
        "tag",
        "agent-name",
        "pr-link",
    }
)
_RECORD_TYPES = frozenset({"user", "assistant"}) | BOOKKEEPING
_AGENT_FILE = re.compile(r"^agent-([A-Za-z0-9_-]+)\.jsonl$")
_AGENT_ID_TEXT = re.compile(r"agentId:\s*([A-Za-z0-9_-]+)")
_TEAMMATE = re.compile(r"<teammate-message\s+([^>]*)>\n?(.*?)\n?</teammate-message>", re.S)
_ATTR = re.compile(r'(\w+)="([^"]*)"')
_NOTE_FIELD = re.compile(r"<(task-id|status|summary|result)>(.*?)</\1>", re.S)
MAIN = "main"
USER = "user"
#: tools that bring in content from outside the machine (MCP tools too, by their ``mcp__`` prefix)
EXTERNAL_TOOLS = frozenset({"WebFetch", "WebSearch"})
#: tools whose result only reports the agent's own action (written by the harness): trusted
OWN_ACTION_TOOLS = frozenset(
    {"Edit", "MultiEdit", "Write", "NotebookEdit", "TodoWrite", "KillShell", "KillBash", "ExitPlanMode"}
)
_NET_COMMAND = re.compile(
    r"(?:^|[\s;&|(`])(?:curl|wget|https?|aria2c|gh|ssh|scp|rsync|nc|git\s+(?:clone|pull|fetch))(?=\s|$)"
)
_REJECTED = "doesn't want to proceed with this tool use"
_USAGE_ATTRS = frozenset({"message_id", "cache_read_tokens", "cache_creation_tokens"})
_event_type = attrgetter("type")
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


# ---------------------------------------------------------------- detection


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    if not p.endswith(".jsonl"):
        return False
    for rec in islice(iter_head_json(p), 8):
        if not isinstance(rec, dict):
            continue
        if "payload" in rec or "rec" in rec:  # Codex rollouts, orchestrace event logs
            return False
        if (
            isinstance(rec.get("type"), str)
            and rec.get("type") in _RECORD_TYPES
            and ("sessionId" in rec or "uuid" in rec or "leafUuid" in rec or "messageId" in rec)
        ):
            return True
        if rec.get("type") in ("user", "assistant") and isinstance(rec.get("message"), dict):
            return True
    return False


def external(tool: str, inp: dict[str, Any]) -> bool:
    """Does this tool call bring in content from outside the machine?"""
    if tool in EXTERNAL_TOOLS or tool.startswith("mcp__"):
        return True
    cmd = inp.get("command")
    return tool == "Bash" and isinstance(cmd, str) and _NET_COMMAND.search(cmd) is not None


def session_of(path: str | os.PathLike[str]) -> Path | None:
    """For a sub-agent file, the session file it belongs to (None if it is not a sub-agent file)."""
    p = Path(path)
    m = _AGENT_FILE.match(p.name)
    if not m:
        return None
    for parent in p.parents:  # new layout: <dir>/<session>/subagents/.../agent-x.jsonl
        if parent.name == "subagents":
            return parent.parent.with_suffix(".jsonl")
    for rec in islice(iter_head_json(p), 3):  # old layout: sessionId inside, session beside
        if isinstance(rec, dict) and isinstance(rec.get("sessionId"), str):
            return p.with_name(rec["sessionId"] + ".jsonl")
    return None


def covered(path: str | os.PathLike[str]) -> bool:
    """True for a sub-agent file whose (non-empty) session imports it; a walker skips it."""
    s = session_of(path)
    return s is not None and s.is_file() and s.stat().st_size > 0


# ---------------------------------------------------------------- reading


def _read(path: Path, stats: ImportStats) -> list[dict[str, Any]]:
    out = []
    for _, rec in iter_jsonl(path, stats):
        if isinstance(rec, dict):
            out.append(rec)
        else:
            stats.unknown["non-object line"] += 1
    return out


def _discover_children(
    session: Path, sid: str, stats: ImportStats, keep_content: bool
) -> tuple[dict[str, list], dict[str, dict]]:
    """Sub-agent logs of a session, keyed by agent id, and their ``.meta.json``."""
    files: dict[str, Path] = {}
    sub = session.with_suffix("") / "subagents"
    if sub.is_dir():
        for f in sorted(sub.rglob("agent-*.jsonl")):
            m = _AGENT_FILE.match(f.name)
            if m:
                files[m.group(1)] = f
    for aid, f, sessions in _beside(session.parent):
        if aid not in files and sid in sessions:
            files[aid] = f
    children: dict[str, list] = {}
    metas: dict[str, dict] = {}
    for aid, f in files.items():
        if f.stat().st_size == 0:
            stats.notes.append(f"empty sub-agent file {f.name}")
            continue
        children[aid] = _read(f, stats)
        meta = f.with_name(f.name[: -len(".jsonl")] + ".meta.json")
        if meta.is_file():
            metas[aid] = _read_meta(meta)
        metas.setdefault(aid, {})["file"] = os.path.relpath(f, session.parent)
        if not keep_content:
            metas[aid].pop("description", None)
    return children, metas


def _read_meta(meta: Path) -> dict[str, Any]:
    """A sub-agent's ``.meta.json``: a JSON object, or the file is bad input (exit 1, named), as
    a damaged session is; an array or a scalar there was an internal error (issue 34)."""
    value = parse_json(meta.read_bytes(), path=str(meta))
    if not isinstance(value, dict):
        raise LoadError(
            "OT102",
            f"a sub-agent's .meta.json must be a JSON object, got {str(value)[:40]}",
            path=str(meta),
            pointer="",
        )
    return value


def _beside(folder: Path) -> list[tuple[str, Path, frozenset[str]]]:
    """(agent id, file, session ids in its first records) of the old-layout sub-agent files in a
    folder. Every session of the folder asks; the heads are read once per folder and state of
    its agent files (name, size, mtime), not once per session: a project folder with S sessions
    and A agent files costs A reads, not S x A."""
    try:  # what folder.glob("agent-*.jsonl") lists, without a Path per entry
        with os.scandir(folder) as entries:
            names = sorted(
                e.name for e in entries if e.name.startswith("agent-") and e.name.endswith(".jsonl")
            )
    except OSError:
        names = []
    state = []
    for name in names:
        try:
            st = os.stat(os.path.join(folder, name))
            state.append((name, st.st_size, st.st_mtime_ns))
        except OSError:  # gone since the listing: read as empty, as before
            state.append((name, -1, -1))
    heads = _sessions_of_agents(os.path.abspath(folder), tuple(state))
    return [(aid, folder / name, ids) for aid, name, ids in heads]


@lru_cache(maxsize=32)
def _sessions_of_agents(
    folder: str, state: tuple[tuple[str, int, int], ...]
) -> tuple[tuple[str, str, frozenset[str]], ...]:
    out = []
    for name, _, _ in state:
        m = _AGENT_FILE.match(name)
        if m:
            head = first_json_lines(os.path.join(folder, name), 3)
            ids = frozenset(
                r["sessionId"] for r in head if isinstance(r, dict) and isinstance(r.get("sessionId"), str)
            )
            out.append((m.group(1), name, ids))
    return tuple(out)


def _split_sidechains(records: list[dict]) -> tuple[list[dict], dict[str, list[dict]]]:
    """Main-file records and in-file sidechain runs (1.0.x wrote sub-agents into the session)."""
    main: list[dict] = []
    runs: dict[str, list[dict]] = {}
    uuids: dict[str, str] = {}
    current: str | None = None
    for r in records:
        if not r.get("isSidechain"):
            main.append(r)
            continue
        key = r.get("agentId")
        if not isinstance(key, str) or not key:  # ids of another type (a dict, a list) read as absent
            parent = r.get("parentUuid")
            if isinstance(parent, str) and parent in uuids:
                key = uuids[parent]
            elif parent is None or current is None:
                key = f"sidechain{len(runs) + 1}"
            else:
                key = current
        current = key
        if isinstance(r.get("uuid"), str):
            uuids[r["uuid"]] = key
        runs.setdefault(key, []).append(r)
    return main, runs


def _first_user_text(records: list[dict]) -> str:
    for r in records:
        if r.get("type") == "user":
            m = r.get("message")
            return as_text(m.get("content")) if isinstance(m, dict) else ""
    return ""


# ---------------------------------------------------------------- conversion


class _Session:
    def __init__(self, b: ImportStaging, children: dict[str, list], metas: dict[str, dict]) -> None:
        self.b = b
        self.children = children
        self.metas = metas
        self.seen: set[str] = set()
        self.pending: dict[str, dict[str, Any]] = {}
        self.usage: dict[str, tuple[int, tuple[int, int, int, int]]] = {}  # message id -> (event, counts)
        self.label_of_id: dict[str, str] = {}
        self.label_of_name: dict[str, str] = {}
        self.used_labels: set[str] = {MAIN, USER}
        self.async_waiting: dict[str, str] = {}
        self.spawned_ids: list[str] = []
        self.models: set[str] = set()
        self.counter = defaultdict(int)

    # -- naming
    def _new_label(self, inp: dict[str, Any]) -> str:
        name = inp.get("name")
        if isinstance(name, str) and name and name not in self.used_labels:
            label = name
        else:
            kind = inp.get("subagent_type") if isinstance(inp.get("subagent_type"), str) else "agent"
            self.counter[kind] += 1
            label = f"{kind}-{self.counter[kind]}"
            while label in self.used_labels:
                self.counter[kind] += 1
                label = f"{kind}-{self.counter[kind]}"
        self.used_labels.add(label)
        if isinstance(name, str) and name:
            self.label_of_name[name] = label
        return label

    def _resolve(self, who: Any) -> str | None:
        if not isinstance(who, str) or not who:
            return None
        who = who.lstrip("@")
        return self.label_of_name.get(who) or self.label_of_id.get(who) or who

    # -- records
    def run(self, records: list[dict], agent: str, *, is_main: bool) -> None:
        first_user = True
        stats = self.b.stats
        counts = stats.records
        seen = self.seen
        events = self.b.events
        for r in records:
            uid = r.get("uuid")
            if isinstance(uid, str):
                if uid in seen:
                    counts["duplicate"] += 1
                    continue
                seen.add(uid)
            else:
                uid = None
            typ = r.get("type")
            if typ is None:
                typ = "None"  # counted under that name, as before
            elif not isinstance(typ, str):  # unhashable or a number: not a record we know
                stats.bad_values["record type that is not a string"] += 1
                continue
            counts[typ] += 1
            n0 = len(events)
            if typ == "assistant":
                self._assistant(r, agent, is_main)
            elif typ == "user":
                self._user(r, agent, is_main, first_user)
                first_user = False
            elif typ not in BOOKKEEPING:
                stats.unknown[typ] += 1
            if uid is not None:  # keep the record id; nested sub-agent events keep their own
                for j in range(n0, len(events)):
                    ev = events[j]
                    attrs = ev.attrs
                    if not attrs:
                        ev.attrs = {"uuid": uid}
                    elif "uuid" not in attrs:
                        ev.attrs = {**attrs, "uuid": uid}

    def _assistant(self, r: dict, agent: str, is_main: bool) -> None:
        b = self.b
        m = r.get("message")
        if not isinstance(m, dict):
            b.stats.unknown["assistant without message"] += 1
            return
        ts = ts_of(r.get("timestamp"))
        model = m.get("model") if isinstance(m.get("model"), str) else None
        if model and model != "<synthetic>":
            self.models.add(model)
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else as_list(content)
        last: int | None = None
        for blk in blocks:
            if not isinstance(blk, dict):
                continue
            i = self._block(blk, agent, ts, model, is_main, r)
            if i is not None:
                last = i
        mid = m.get("id") or r.get("requestId") or r.get("uuid")
        usage = m.get("usage")
        if isinstance(usage, dict) and isinstance(mid, str):
            if last is None and mid not in self.usage:
                last = b.add("message", agent, ts, model=model, attrs={"kind": "empty"})
            self._add_usage(mid, last, usage)

    def _block(
        self, blk: dict, agent: str, ts: float | None, model: str | None, is_main: bool, r: dict
    ) -> int | None:
        b = self.b
        bt = blk.get("type")
        if bt == "text":
            text = blk.get("text") or ""
            if not text.strip():
                return None
            return b.add(
                "message",
                agent,
                ts,
                to=USER if is_main else None,
                model=model,
                content=text,
                attrs={"kind": "text"},
            )
        if bt in ("thinking", "redacted_thinking"):
            return b.add(
                "orchestrator_decision",
                agent,
                ts,
                model=model,
                content=blk.get("thinking") or blk.get("data"),
                attrs={"kind": bt},
            )
        if bt != "tool_use":
            b.stats.unknown[f"content block {bt}"] += 1
            return None
        name = str(blk.get("name") or "?")
        cid = str(blk.get("id") or f"{r.get('uuid')}:{name}")
        inp = blk.get("input") if isinstance(blk.get("input"), dict) else {}
        attrs: dict[str, Any] = {"tool_use_id": cid}
        if name in SPAWN_TOOLS:
            label = self._new_label(inp)
            for k in ("subagent_type", "name", "team_name", "run_in_background", "isolation"):
                if k in inp:
                    attrs[k] = inp[k]
            if b.keep_content and isinstance(inp.get("description"), str):
                attrs["description"] = redact(inp["description"])
            i = b.spawn(
                agent, label, ts, tool=name, call_id=cid, model=model, content=inp.get("prompt"), attrs=attrs
            )
            role = inp.get("subagent_type")
            if isinstance(role, str):
                b.events[i].role = role
            self.pending[cid] = {"kind": "spawn", "label": label, "input": inp, "event": i, "agent": agent}
        elif name in MESSAGE_TOOLS:
            to = self._resolve(inp.get("to") or inp.get("recipient"))
            if isinstance(inp.get("type"), str):
                attrs["msg_type"] = inp["type"]  # message, broadcast, shutdown_request, ...
            if b.keep_content and isinstance(inp.get("summary"), str):
                attrs["summary"] = redact(inp["summary"])
            i = b.add(
                "message",
                agent,
                ts,
                to=to,
                tool=name,
                call_id=cid,
                model=model,
                content=inp.get("message") or inp.get("content"),
                attrs=attrs,
            )
            self.pending[cid] = {"kind": "call", "event": i}
        elif name in DECISION_TOOLS:
            attrs["kind"] = name
            for k in ("taskId", "status", "owner"):
                if k in inp:
                    attrs[k] = inp[k]
            i = b.add(
                "orchestrator_decision",
                agent,
                ts,
                tool=name,
                call_id=cid,
                model=model,
                content=inp,
                attrs=attrs,
            )
            self.pending[cid] = {"kind": "call", "event": i}
        else:
            attrs["input_keys"] = sorted(inp)
            i = b.tool_call(agent, ts, name, cid, model=model, content=inp, attrs=attrs)
            self.pending[cid] = {"kind": "tool", "event": i, "tool": name, "external": external(name, inp)}
        b.register_call(cid, i)
        return i

    def _add_usage(self, mid: str, idx: int | None, usage: dict) -> None:
        """Usage of one API call, on the last event it produced (its action): streamed records of
        the same call move it forward and keep the largest value per field."""
        stats = self.b.stats
        get = usage.get
        n_in, n_out, n_read, n_made = [  # nearly always plain counts: as_count only for anything else
            v if type(v := get(k)) is int and 0 <= v <= INT64_MAX else as_count(v, stats, k)
            for k in _USAGE_FIELDS
        ]
        held = self.usage.get(mid)
        if held is not None:
            at, (o_in, o_out, o_read, o_made) = held
            n_in, n_out, n_read, n_made = (
                max(n_in, o_in),
                max(n_out, o_out),
                max(n_read, o_read),
                max(n_made, o_made),
            )
            if idx is None or idx == at:
                idx = at
            else:
                prev = self.b.events[at]
                prev.tokens_in = prev.tokens_out = None
                prev.attrs = {k: v for k, v in (prev.attrs or {}).items() if k not in _USAGE_ATTRS} or None
        if idx is None:
            return
        self.usage[mid] = (idx, (n_in, n_out, n_read, n_made))
        ev = self.b.events[idx]
        ev.tokens_in = n_in + n_read + n_made
        ev.tokens_out = n_out
        ev.attrs = {
            **(ev.attrs or {}),
            "message_id": mid,
            "cache_read_tokens": n_read,
            "cache_creation_tokens": n_made,
        }

    def _user(self, r: dict, agent: str, is_main: bool, first_user: bool) -> None:
        m = r.get("message")
        if not isinstance(m, dict):
            self.b.stats.unknown["user without message"] += 1
            return
        ts = ts_of(r.get("timestamp"))
        content = m.get("content")
        if isinstance(content, str):
            self._user_text(content, r, agent, is_main, first_user, ts)
            return
        if not isinstance(content, list):
            return
        texts = []
        for blk in content:
            if not isinstance(blk, dict):
                continue
            bt = blk.get("type")
            if bt == "tool_result":
                self._result(blk, r, agent, ts)
            elif bt == "text":
                texts.append(str(blk.get("text") or ""))
            elif bt not in ("image", "document"):
                self.b.stats.unknown[f"content block {bt}"] += 1
        if texts:
            self._user_text("\n".join(texts), r, agent, is_main, first_user, ts)

    def _user_text(
        self, text: str, r: dict, agent: str, is_main: bool, first_user: bool, ts: float | None
    ) -> None:
        b = self.b
        if not text.strip():
            return
        if "<teammate-message" in text:
            self._teammate_messages(text, agent, ts, skip_first=first_user and not is_main)
            return
        if "<task-notification>" in text:
            self._task_notification(text, agent, ts)
            return
        if not is_main and first_user:
            return  # the sub-agent's prompt: carried by the spawn event
        if r.get("isMeta"):
            b.stats.records["meta user text"] += 1
            return
        if is_main:
            kind = "command" if text.lstrip().startswith(("<command-", "<local-command")) else "prompt"
            b.add("human_intervention", USER, ts, to=agent, content=text, trusted=True, attrs={"kind": kind})
        else:
            b.add(
                "message", self.b.spawner(agent) or USER, ts, to=agent, content=text, attrs={"kind": "input"}
            )

    def _teammate_messages(self, text: str, agent: str, ts: float | None, *, skip_first: bool) -> None:
        for k, m in enumerate(_TEAMMATE.finditer(text)):
            if skip_first and k == 0:
                continue
            attrs = dict(_ATTR.findall(m.group(1)))
            sender = self._resolve(attrs.get("teammate_id")) or "teammate"
            if sender == agent:
                continue
            self.b.add(
                "message", sender, ts, to=agent, content=m.group(2),
                attrs={"kind": "teammate-message", "teammate_id": attrs.get("teammate_id")},
            )  # fmt: skip

    def _task_notification(self, text: str, agent: str, ts: float | None) -> None:
        fields = dict(_NOTE_FIELD.findall(text))
        tid = fields.get("task-id", "").strip()
        label = self.async_waiting.pop(tid, None)
        status = "error" if fields.get("status", "").strip() in ("failed", "error", "killed") else "ok"
        if label is not None:
            self.b.ret(
                label,
                ts,
                content=fields.get("result"),
                status=status,
                attrs={"kind": "task-notification", "agent_id": tid},
            )
        else:
            self.b.add(
                "message",
                USER,
                ts,
                to=agent,
                content=text,
                attrs={"kind": "task-notification", "task_id": tid},
            )

    def _result(self, blk: dict, r: dict, agent: str, ts: float | None) -> None:
        b = self.b
        cid = str(blk.get("tool_use_id") or "")
        status = "error" if blk.get("is_error") else "ok"
        p = self.pending.pop(cid, None)
        content = blk.get("content")
        if p is None:
            b.tool_result(agent, ts, None, cid, content=content, status=status)
            return
        if p["kind"] == "call":
            b.finish_call(cid, ts, status=status)
        elif p["kind"] == "tool":
            attrs = {"external": True} if p["external"] else None
            trusted = p["tool"] in OWN_ACTION_TOOLS
            b.tool_result(
                agent, ts, p["tool"], cid, content=content, status=status, trusted=trusted, attrs=attrs
            )
        else:
            self._finish_spawn(cid, p, r.get("toolUseResult"), content, status, ts)
        if status == "error" and _REJECTED in as_text(content):  # the human said no
            b.add(
                "human_intervention",
                USER,
                ts,
                to=agent,
                attrs={"kind": "rejected_tool_use", "tool_use_id": cid},
            )

    def _finish_spawn(self, cid: str, p: dict, tur: Any, content: Any, status: str, ts: float | None) -> None:
        b = self.b
        label = p["label"]
        text = as_text(content)
        tur = tur if isinstance(tur, dict) else {}
        aid = tur.get("agentId")
        if not isinstance(aid, str):
            m = _AGENT_ID_TEXT.search(text)
            aid = m.group(1) if m else None
        records = self._take_child(aid, p["input"].get("prompt"))
        if records is not None:
            aid = records[0]
            self._attach(p["event"], aid, label)
            self.run(records[1], label, is_main=False)
        elif aid:
            self._attach(p["event"], aid, label)
        is_async = (
            bool(tur.get("isAsync"))
            or tur.get("status") == "async_launched"
            or "Async agent launched" in text
        )
        b.finish_call(cid, ts)
        if is_async and aid:
            self.async_waiting[aid] = label
            return
        attrs: dict[str, Any] = {"kind": "subagent-result", "tool_use_id": cid}
        for k in ("agentId", "status", "totalTokens", "totalDurationMs", "totalToolUseCount"):
            if k in tur:
                attrs[k] = tur[k]
        b.ret(label, ts, call_id=cid, content=content, status=status, attrs=attrs)

    def _attach(self, spawn_idx: int, aid: str, label: str) -> None:
        self.label_of_id[aid] = label
        self.spawned_ids.append(aid)
        ev = self.b.events[spawn_idx]
        extra = {"agent_id": aid}
        if aid in self.metas:
            extra["subagent_meta"] = self.metas[aid]
        ev.attrs = {**(ev.attrs or {}), **extra}

    def _take_child(self, aid: str | None, prompt: Any) -> tuple[str, list] | None:
        if aid and aid in self.children:
            return aid, self.children.pop(aid)
        if isinstance(prompt, str) and prompt.strip():
            key = prompt.strip()[:200]
            for cid, recs in self.children.items():
                if key in _first_user_text(recs):
                    return cid, self.children.pop(cid)
        return None

    # -- leftovers
    def finish(self) -> None:
        b = self.b
        for p in list(self.pending.values()):  # spawns that never returned (interrupted)
            if p["kind"] == "spawn":
                found = self._take_child(None, p["input"].get("prompt"))
                if found:
                    self._attach(p["event"], found[0], p["label"])
                    self.run(found[1], p["label"], is_main=False)
                b.events[p["event"]].attrs = {**(b.events[p["event"]].attrs or {}), "returned": False}
        for aid, label in list(self.async_waiting.items()):  # background agents without notification
            b.ret(label, None, attrs={"kind": "subagent-end", "agent_id": aid, "synthetic": True})
        for aid in sorted(self.children, key=lambda a: _first_ts(self.children[a])):
            records = self.children.pop(aid)
            meta = self.metas.get(aid, {})
            kind = meta.get("agentType") if isinstance(meta.get("agentType"), str) else "subagent"
            label = self._new_label({"subagent_type": kind})
            i = b.spawn(
                MAIN,
                label,
                _first_ts(records),
                role=kind,
                attrs={"synthetic": True, "agent_id": aid, "subagent_meta": meta},
            )
            self.label_of_id[aid] = label
            self.spawned_ids.append(aid)
            self.run(records, label, is_main=False)
            if b.last_of(label) is not None and b.last_of(label) != i:
                b.ret(
                    label,
                    _last_ts(records),
                    attrs={"kind": "subagent-end", "agent_id": aid, "synthetic": True},
                )


def _first_ts(records: list[dict]) -> float:
    for r in records:
        t = ts_of(r.get("timestamp"))
        if t is not None:
            return t
    return 0.0


def _last_ts(records: list[dict]) -> float | None:
    for r in reversed(records):
        t = ts_of(r.get("timestamp"))
        if t is not None:
            return t
    return None


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    """The trace of one session file with all its sub-agents (a generator of one Trace)."""
    p = Path(path)
    require_nonempty(p)
    b = ImportStaging(keep_content=keep_content)
    records = _read(p, b.stats)
    if not any(r.get("type") in ("user", "assistant") for r in records):
        b.stats.notes.append("no user or assistant records")
    sid = next((r["sessionId"] for r in records if isinstance(r.get("sessionId"), str)), p.stem)
    m = _AGENT_FILE.match(p.name)
    standalone = m is not None
    children, metas = ({}, {}) if standalone else _discover_children(p, sid, b.stats, keep_content)
    main_records, sidechains = _split_sidechains(records) if not standalone else (records, {})
    for key, recs in sidechains.items():
        children.setdefault(key, [])
        children[key] = children[key] + recs
    n_child_files = len(children)
    s = _Session(b, children, metas)
    main = f"agent-{m.group(1)}" if m else MAIN
    s.run(main_records, main, is_main=True)
    s.finish()
    if not b.events:
        raise LoadError(
            "OT006", "session holds no user or assistant messages (bookkeeping records only)", path=str(p)
        )
    versions = sorted({r["version"] for r in records if isinstance(r.get("version"), str)})
    branch = next((r["gitBranch"] for r in records if r.get("gitBranch")), None)
    cwd = next((r["cwd"] for r in records if isinstance(r.get("cwd"), str)), None)
    meta: dict[str, Any] = {
        "source_format": NAME,
        "source": str(p),
        "session_id": sid,
        "project": p.parent.name,
        "cli_versions": versions,
        "models": sorted(s.models),
        "subagent_logs": n_child_files,
        "subagent_ids": s.spawned_ids,
    }
    if standalone:
        meta["standalone_subagent"] = True
    if branch:
        meta["git_branch"] = branch
    if cwd:
        meta["cwd"] = cwd
    has_spawn = "spawn" in map(_event_type, b.events)
    if standalone:
        trace_id = f"claude-code:{sid}:{m.group(1)}"
    elif p.stem != sid:  # a file not named after its session (a copy, a fixture, a resumed log)
        trace_id = f"claude-code:{sid}:{p.stem}"  # shares the id with others of that session
    else:
        trace_id = f"claude-code:{sid}"
    yield b.build(
        trace_id=trace_id,
        task_id=sid,
        system="claude-code",
        topology="centralized" if has_spawn else "harness",
        metadata=meta,
    )
