"""OpenAI Codex CLI rollouts (``~/.codex/sessions/**/rollout-*.jsonl``) as traces.

Records are ``{"timestamp", "type", "payload"}``. Mapping: ``session_meta`` -> metadata;
``turn_context`` -> the model and turn of the following events; ``event_msg/user_message`` ->
``human_intervention``; ``response_item`` ``message`` (assistant) -> ``message`` to the user,
``reasoning`` -> ``orchestrator_decision``; ``function_call``/``custom_tool_call`` ->
``tool_call`` and their ``*_output`` -> ``tool_result``; ``web_search_call`` -> a call/result
pair; ``update_plan`` -> ``orchestrator_decision``; collaboration tools ``spawn_agent`` ->
``spawn``, ``send_input`` -> ``message``, ``close_agent`` -> ``despawn``.
``exec_command_end``/``patch_apply_end`` give exit codes (non-zero -> status error).
``token_count`` carries the usage of the model call just made: its ``last_token_usage`` goes to
the last model event since the previous count (the call's action) (``tokens_in`` = input incl. cached,
``tokens_out`` = output incl. reasoning), so the trace total equals the final
``total_token_usage``. Repeated counts (unchanged totals) are not counted twice.

Multi-agent sessions: a sub-agent thread writes its own rollout whose ``session_meta.source`` is
``{"subagent": {"thread_spawn": {"parent_thread_id": ...}}}``. Such rollouts beside the parent
are imported into the parent's trace under the ``spawn_agent`` call that created them (matched
by the ``agent_id`` in the call's output; a spawn marked ``synthetic`` otherwise), with a
``return`` at their last record; a directory walk skips them (``covered``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from .reading import first_json_lines, iter_jsonl, require_nonempty
from .staging import ImportStaging
from .values import as_count, as_list, as_obj, ts_of

NAME = "codex"
DESCRIPTION = "OpenAI Codex CLI rollouts (rollout-*.jsonl)"

AGENT = "codex"
USER = "user"
DECISION_TOOLS = frozenset({"update_plan"})
_SKIP_EVENTS = frozenset(
    {"agent_message", "agent_reasoning", "task_started", "task_complete", "turn_aborted", "web_search_begin", "exec_command_begin", "patch_apply_begin", "mcp_tool_call_begin", "mcp_tool_call_end", "turn_diff", "context_compacted", "entered_review_mode", "exited_review_mode"}
)  # fmt: skip
_MODEL_ITEMS = frozenset(
    {"message", "reasoning", "function_call", "custom_tool_call", "web_search_call", "local_shell_call"}
)


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    if not p.endswith(".jsonl"):
        return False
    head = first_json_lines(p, 3)
    return any(
        isinstance(r, dict)
        and "payload" in r
        and r.get("type") in ("session_meta", "turn_context", "response_item", "event_msg")
        for r in head
    )


class _Rollout:
    def __init__(self, b: ImportStaging, agent: str = AGENT, parent: str | None = None) -> None:
        self.b = b
        self.agent = agent
        self.parent = parent  # set for a sub-agent's rollout: its prompts come from the parent
        self.first_ts: float | None = None  # the session start: t = 0
        self.last_ts: float | None = None
        self.model: str | None = None
        self.turn = -1
        self.turn_ids: dict[str, int] = {}
        self.unpaid: list[int] = []  # model events since the last token count
        self.last_model: int | None = None
        self.last_total: Any = None
        self.calls: dict[str, str] = {}  # call_id -> kind
        self.results: dict[str, int] = {}
        self.exec_end: dict[str, dict[str, Any]] = {}
        self.children: dict[str, str] = {}
        self.meta: dict[str, Any] = {}
        self.n_search = 0

    def record(self, r: dict[str, Any]) -> None:
        b = self.b
        typ = r.get("type")
        p = r.get("payload")
        ts = ts_of(r.get("timestamp"))
        if ts is not None:
            self.last_ts = ts
            if self.first_ts is None:
                self.first_ts = ts
        if not isinstance(p, dict):
            b.stats.unknown[f"{typ} without payload"] += 1
            return
        sub = p.get("type")
        if not isinstance(sub, str | None):
            b.stats.bad_values["payload type that is not a string"] += 1
            return
        b.stats.records[f"{typ}/{sub}" if sub else str(typ)] += 1
        if typ == "session_meta":
            for k in ("id", "timestamp", "cli_version", "originator", "source", "model_provider", "cwd"):
                if k in p:
                    self.meta[k] = p[k]
        elif typ == "turn_context":
            self.model = p.get("model") if isinstance(p.get("model"), str) else self.model
            self._turn(p.get("turn_id"))
        elif typ == "response_item":
            self._item(sub, p, ts)
        elif typ == "event_msg":
            self._event(sub, p, ts)
        elif typ != "compacted":
            b.stats.unknown[str(typ)] += 1

    def _turn(self, turn_id: Any) -> None:
        if isinstance(turn_id, str) and turn_id not in self.turn_ids:
            self.turn += 1
            self.turn_ids[turn_id] = self.turn

    def _model_event(self, i: int) -> int:
        self.unpaid.append(i)
        self.last_model = i
        return i

    def _item(self, sub: Any, p: dict[str, Any], ts: float | None) -> None:
        b = self.b
        turn = max(self.turn, 0)
        if sub == "message":
            role = p.get("role")
            if role == "assistant":
                self._model_event(
                    b.add(
                        "message",
                        self.agent,
                        ts,
                        to=USER,
                        model=self.model,
                        turn=turn,
                        content=p.get("content"),
                        attrs={"kind": "text", "phase": p.get("phase")}
                        if p.get("phase")
                        else {"kind": "text"},
                    )
                )
            # user/developer items repeat the user_message event and the instructions
        elif sub == "reasoning":
            summary = as_list(p.get("summary"))
            self._model_event(
                b.add(
                    "orchestrator_decision",
                    self.agent,
                    ts,
                    model=self.model,
                    turn=turn,
                    content=summary or None,
                    attrs={"kind": "reasoning", "encrypted": bool(p.get("encrypted_content"))},
                )
            )
        elif sub in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(p, ts, turn)
        elif sub in ("function_call_output", "custom_tool_call_output"):
            self._output(p, ts, turn)
        elif sub == "web_search_call":
            self.n_search += 1
            cid = f"web_search-{self.n_search}"
            i = b.tool_call(
                self.agent, ts, "web_search", cid, model=self.model, turn=turn, content=p.get("action")
            )
            self._model_event(i)
            b.tool_result(
                self.agent,
                ts,
                "web_search",
                cid,
                turn=turn,
                status="ok" if p.get("status") in (None, "completed") else "error",
                attrs={"external": True},  # web content: untrusted and from outside (see docs/importers.md)
            )
        else:
            b.stats.unknown[f"response_item/{sub}"] += 1

    def _call(self, p: dict[str, Any], ts: float | None, turn: int) -> None:
        b = self.b
        name = str(p.get("name") or p.get("type"))
        cid = str(p.get("call_id") or p.get("id") or f"{name}-{len(self.calls)}")
        raw = p.get("arguments") if "arguments" in p else p.get("input", p.get("action"))
        args: Any = raw
        if isinstance(raw, str):
            try:
                args = orjson.loads(raw)
            except orjson.JSONDecodeError:
                args = raw
        attrs: dict[str, Any] = {"call_type": p.get("type")}
        fields = {
            "tool": name,
            "call_id": cid,
            "model": self.model,
            "turn": turn,
            "content": args,
            "attrs": attrs,
        }
        if name == "spawn_agent":
            n = len(set(self.children.values())) + 1
            label = f"subagent-{n}" if self.parent is None else f"{self.agent}.{n}"
            self.children[cid] = label
            i = b.spawn(self.agent, label, ts, **fields)
            kind = "spawn"
        elif name == "send_input" or name == "close_agent":
            target = args.get("id") or args.get("agent_id") if isinstance(args, dict) else None
            ty = "despawn" if name == "close_agent" else "message"
            i = b.add(ty, self.agent, ts, to=self._child(target), **fields)
            kind = "decision"
        elif name in DECISION_TOOLS:
            attrs["kind"] = name
            i = b.add("orchestrator_decision", self.agent, ts, **fields)
            kind = "decision"
        else:
            if isinstance(args, dict):
                attrs["input_keys"] = sorted(args)
            i = b.tool_call(self.agent, ts, **fields)
            kind = "tool"
        b.register_call(cid, i)
        self.calls[cid] = kind
        self._model_event(i)

    def _child(self, agent_id: Any) -> str | None:
        if isinstance(agent_id, str):
            return self.children.get(agent_id, agent_id)
        return None

    def _output(self, p: dict[str, Any], ts: float | None, turn: int) -> None:
        b = self.b
        cid = str(p.get("call_id"))
        kind = self.calls.get(cid)
        out = p.get("output")
        if kind == "tool" or kind is None:
            self.results[cid] = b.tool_result(self.agent, ts, None, cid, turn=turn, content=out, status="ok")
        else:
            if kind == "spawn":  # the output names the new agent's id
                text = out if isinstance(out, str) else orjson.dumps(out).decode()
                try:
                    aid = orjson.loads(text).get("agent_id")
                except (orjson.JSONDecodeError, AttributeError):
                    aid = None
                if isinstance(aid, str):
                    self.children[aid] = self.children[cid]
            b.finish_call(cid, ts)

    def _event(self, sub: Any, p: dict[str, Any], ts: float | None) -> None:
        b = self.b
        if sub == "user_message" and self.parent is not None:  # a sub-agent's task, from its parent
            b.add(
                "message",
                self.parent,
                ts,
                chain=False,
                to=self.agent,
                content=p.get("message"),
                attrs={"kind": "prompt"},
            )
        elif sub == "user_message":
            b.add(
                "human_intervention",
                USER,
                ts,
                to=self.agent,
                turn=max(self.turn, 0),
                content=p.get("message"),
                attrs={"kind": "prompt"},
            )
        elif sub == "token_count":
            self._tokens(p)
        elif sub in ("exec_command_end", "patch_apply_end"):
            cid = p.get("call_id")
            if isinstance(cid, str):
                info: dict[str, Any] = {}
                if "exit_code" in p:
                    info["exit_code"] = p["exit_code"]
                if "success" in p:
                    info["success"] = p["success"]
                if "duration" in p:
                    info["duration"] = p["duration"]
                self.exec_end[cid] = info
        elif sub in _SKIP_EVENTS or sub == "web_search_end":
            if sub == "task_started":
                self._turn(p.get("turn_id"))
        else:
            b.stats.unknown[f"event_msg/{sub}"] += 1

    def _tokens(self, p: dict[str, Any]) -> None:
        info = p.get("info")
        if not isinstance(info, dict):
            return
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            self.b.stats.records["repeated token_count"] += 1
            return
        self.last_total = total
        last = as_obj(info.get("last_token_usage"))
        target = self.unpaid[-1] if self.unpaid else self.last_model  # the call's action
        if target is None:
            target = self.b.add(
                "orchestrator_decision", self.agent, None, model=self.model, attrs={"kind": "model_call"}
            )
        ev = self.b.events[target]
        stats = self.b.stats
        ev.tokens_in = (ev.tokens_in or 0) + as_count(last.get("input_tokens"), stats, "input_tokens")
        ev.tokens_out = (ev.tokens_out or 0) + as_count(last.get("output_tokens"), stats, "output_tokens")
        a = dict(ev.attrs or {})
        for k in ("cached_input_tokens", "reasoning_output_tokens"):
            a[k] = a.get(k, 0) + as_count(last.get(k), stats, k)
        ev.attrs = a
        self.unpaid = []

    def finish(self) -> None:
        for cid, info in self.exec_end.items():
            i = self.results.get(cid)
            if i is None:
                continue
            ev = self.b.events[i]
            ev.attrs = {**(ev.attrs or {}), **info}
            if info.get("exit_code") not in (None, 0) or info.get("success") is False:
                ev.status = "error"


def _session_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    for r in first_json_lines(path, 3):
        if isinstance(r, dict) and r.get("type") == "session_meta" and isinstance(r.get("payload"), dict):
            return r["payload"]
    return {}


def _parent_thread(meta: dict[str, Any]) -> str | None:
    """The parent session id of a sub-agent rollout (``source.subagent.thread_spawn``)."""
    src = meta.get("source")
    sub = src.get("subagent") if isinstance(src, dict) else None
    spawn = sub.get("thread_spawn") if isinstance(sub, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return parent if isinstance(parent, str) else None


def _children(path: Path, sid: str) -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for f in sorted(path.parent.glob("rollout-*.jsonl")):
        if f != path and f.stat().st_size:
            meta = _session_meta(f)
            if _parent_thread(meta) == sid:
                out.append((f, meta))
    return out


def covered(path: str | os.PathLike[str]) -> bool:
    """A sub-agent rollout whose parent rollout sits beside it is imported with the parent."""
    parent = _parent_thread(_session_meta(path))
    if parent is None:
        return False
    p = Path(path)
    return any(f != p and _session_meta(f).get("id") == parent for f in p.parent.glob("rollout-*.jsonl"))


def _run_file(b: ImportStaging, path: Path, agent: str, parent: str | None) -> _Rollout:
    run = _Rollout(b, agent, parent)
    for _, rec in iter_jsonl(path, b.stats):
        if isinstance(rec, dict):
            run.record(rec)
        else:
            b.stats.unknown["non-object line"] += 1
    run.finish()
    sid = run.meta.get("id")
    for k, (child, meta) in enumerate(_children(path, sid) if isinstance(sid, str) else []):
        cid = str(meta.get("id"))
        spawn = as_obj(as_obj(as_obj(meta.get("source")).get("subagent")).get("thread_spawn"))
        label = run.children.get(cid)
        info = {
            "agent_id": cid,
            "nickname": spawn.get("agent_nickname"),
            "agent_role": spawn.get("agent_role"),
        }
        if label is None:  # no spawn_agent call names it: keep the log, mark the spawn
            run.children[cid] = label = (
                f"subagent-{len(set(run.children.values())) + 1}" if parent is None else f"{agent}.s{k + 1}"
            )
            first = next(
                (ts_of(r.get("timestamp")) for r in first_json_lines(child, 1) if isinstance(r, dict)), None
            )
            b.spawn(agent, label, first, chain=False, attrs={"synthetic": True, **info})
        else:
            b.annotate_spawn(label, info)
        sub = _run_file(b, child, label, agent)
        b.ret(label, sub.last_ts, attrs={"kind": "subagent-end", **info})
    return run


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    b = ImportStaging(keep_content=keep_content)
    run = _run_file(b, p, AGENT, None)
    sid = str(run.meta.get("id") or p.stem)
    meta = {"source_format": NAME, "source": str(p), "session": run.meta, "turns": run.turn + 1}
    if run.last_total is not None:
        meta["reported_total_token_usage"] = run.last_total
    spawned = any(e.type == "spawn" for e in b.events)
    yield b.build(
        trace_id=f"codex:{sid}",
        task_id=sid,
        system="codex-cli",
        topology="centralized" if spawned else "harness",
        metadata=meta,
        t0=run.first_ts,
    )
