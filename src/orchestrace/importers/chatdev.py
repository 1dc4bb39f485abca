"""ChatDev v1 software-company logs (``WareHouse/<project>/<name>.log``) as traces.

The chat chain is the orchestrator (agent ``ChatChain``): each phase start becomes an
``orchestrator_decision`` naming the phase and its two roles, each role turn a ``message`` from the
speaking role to its partner, each ``[Seminar Conclusion]`` an ``aggregate``, and environment
steps (``[Update Codes]``, ``[Execute Detail]``, ...) a ``tool_call``/``tool_result`` pair. The
``[OpenAI_Usage_Info]`` blocks give tokens to the next role turn; the final ``[Post Info]`` block
(cost, tokens, duration, code statistics) is kept in ``metadata["post_info"]`` and its cost in
``costs["usd"]``. Three generations of the log layout are read (2023-06, 2023-07, 2023-08+).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..core.errors import LoadError
from .reading import head_bytes, require_nonempty
from .redact import redact
from .staging import ImportStaging
from .values import as_count, as_int

NAME = "chatdev"
DESCRIPTION = "ChatDev v1 WareHouse logs (phases, role turns, [Post Info] cost/tokens/duration)"

CHAIN = "ChatChain"
_HEADER = re.compile(r"^\[(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) (\w+)\] ?", re.M)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TABLE = re.compile(r"^\| \*\*(\w+)\*\* \| (.*?) \|\s*$", re.M)
_TURN = re.compile(
    r"^(?P<speaker>[^:*\n]+): \*\*(?P<a>[^*\n]+?)<->(?P<b>[^*\n]+?) on : (?P<phase>\w+), turn (?P<turn>\d+)\*\*"
)
_START = re.compile(r"^(?P<speaker>[^:*\n]+): \*\*\[Start Chat\]\*\*")
_OLD_TURN = re.compile(r"^(?:\[(?P<turn>\d+)\] )?AI (?P<side>Assistant|User) \((?P<role>[^)]+)\)(?P<rest>.*)")
_TOKENS = re.compile(r"(prompt_tokens|completion_tokens|total_tokens): (\d+)")
_POST = re.compile(r"\*\*(\w+)\*\*=\$?(-?[\d.]+)")
_TOOL_TAGS = {
    "[Update Codes]": "update_codes",
    "[Rewrite Codes]": "rewrite_codes",
    "[Execute Detail]": "execute",
    "[Test Reports]": "test_reports",
    "[Test Info]": "test_info",
}
_OWN_ACTIONS = frozenset({"update_codes", "rewrite_codes"})
_SKIP = ("flask app.py did not start", "System: **[RolePlaying]**", "Task prompt:", "ChatDev Ends", "AgentTech Ends", "log_filename:", "Log File:", "ChatDevConfig", "**[OpenAI_Usage_Info Send]**", "**[Software Info]**", "Software Info:")  # fmt: skip


def sniff(path: str | os.PathLike[str]) -> bool:
    p = os.fspath(path)
    if not p.endswith(".log"):
        return False
    head = head_bytes(p, 8192)
    return any(k in head for k in (b"ChatDev Starts", b"AgentTech Starts", b"**[Preprocessing]**"))


def _entries(text: str, path: str) -> Iterator[tuple[float, str, int]]:
    """(POSIX time, body, line) of each log entry; ChatDev writes dates as year-day-month."""
    heads = list(_HEADER.finditer(text))
    for k, m in enumerate(heads):
        y, d, mo, hh, mi, ss = (int(x) for x in m.groups()[:6])
        line = text.count("\n", 0, m.start()) + 1
        try:
            t = datetime(y, mo, d, hh, mi, ss, tzinfo=UTC).timestamp()
        except ValueError:  # a log with month-day order after all
            try:
                t = datetime(y, d, mo, hh, mi, ss, tzinfo=UTC).timestamp()
            except ValueError:
                raise LoadError(
                    "OT023",
                    f"entry header {m.group(0).strip()!r} holds no valid date (expected [YYYY-DD-MM hh:mm:ss LEVEL])",
                    path=path,
                    line=line,
                ) from None
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        yield t, _ANSI.sub("", text[m.end() : end]).strip(), line


class _Run:
    def __init__(self, b: ImportStaging, path: str) -> None:
        self.b = b
        self.path = path
        self.phase: str | None = None
        self.roles: dict[str, str] = {}  # side -> role (old layouts)
        self.pending_usage = [0, 0]
        self.usage_blocks = 0
        self.last_msg: int | None = None
        self.phase_event: int | None = None  # the decision that opened the current phase
        self.concluded = False  # the current phase's seminar conclusion was logged
        self.meta: dict[str, Any] = {}
        self.post: dict[str, float] = {}
        self.calls = 0

    def _message(
        self, speaker: str, to: str | None, t: float, body: str, turn: int | None, kind: str
    ) -> None:
        attrs: dict[str, Any] = {"kind": kind}
        if self.phase:
            attrs["phase"] = self.phase
        i = self.b.add("message", speaker, t, to=to, role=speaker, turn=turn, content=body, attrs=attrs)
        if self.pending_usage != [0, 0]:
            self._give_usage(i)
        if self.last_msg is not None and self.b.events[self.last_msg].agent != speaker:
            self.b.edge(self.last_msg, i, "message")
        elif self.last_msg is None and self.phase_event is not None:
            self.b.edge(self.phase_event, i, "causal")  # the chain opened this chat
        self.last_msg = i

    def _give_usage(self, i: int) -> None:
        ev = self.b.events[i]
        ev.tokens_in = (ev.tokens_in or 0) + self.pending_usage[0]
        ev.tokens_out = (ev.tokens_out or 0) + self.pending_usage[1]
        self.pending_usage = [0, 0]

    def entry(self, t: float, body: str, line: int) -> None:
        b = self.b
        first = body.split("\n", 1)[0]
        rest = body.split("\n", 1)[1].strip() if "\n" in body else ""
        if first.startswith(_SKIP):
            b.stats.records["bookkeeping"] += 1
            return
        if "[OpenAI_Usage_Info" in first:
            tok = dict(_TOKENS.findall(body))
            self.pending_usage[0] += as_count(tok.get("prompt_tokens"), b.stats, "prompt_tokens")
            self.pending_usage[1] += as_count(tok.get("completion_tokens"), b.stats, "completion_tokens")
            self.usage_blocks += 1
            b.stats.records["usage"] += 1
            return
        if first.startswith(("**[Preprocessing]**", "ChatDev Starts", "AgentTech Starts", "args:")):
            for key in ("task_prompt", "project_name"):
                m = re.search(rf"\*\*{key}\*\*: (.*)", body)
                if m:
                    self.meta[key] = m.group(1).strip()
            m = re.search(r"task='(.*?)', name='(.*?)'", body)
            if m:
                self.meta["task_prompt"], self.meta["project_name"] = m.group(1), m.group(2)
            b.stats.records["preprocessing"] += 1
            return
        if first.startswith("System: **[chatting]**"):
            table = dict(_TABLE.findall(body))
            self._phase(
                t, table.get("phase_name"), table.get("assistant_role_name"), table.get("user_role_name")
            )
            return
        if first.startswith("PhaseType:"):
            self._phase(t, first.split(".")[-1].strip(), None, None)
            return
        if first.startswith("**[Seminar Conclusion]**"):
            i = b.add(
                "aggregate", CHAIN, t, content=rest, attrs={"kind": "seminar_conclusion", "phase": self.phase}
            )
            if self.last_msg is not None:  # the chain waited for the chat it concludes
                b.edge(self.last_msg, i, "aggregate")
            self.concluded = True
            return
        if first.startswith("**[Post Info]**"):
            self.post = {k: self._number(k, v, line) for k, v in _POST.findall(body)}
            return
        for tag, tool in _TOOL_TAGS.items():
            if first.startswith(f"**{tag}**"):
                self.calls += 1
                cid = f"{tool}-{self.calls}"
                i = b.tool_call(CHAIN, t, tool, cid, attrs={"phase": self.phase})
                if self.last_msg is not None and not self.concluded:  # acts on the chat's output
                    b.edge(self.last_msg, i, "causal")
                # writing the code is the chain's own action; running it and test reports are output
                b.tool_result(CHAIN, t, tool, cid, content=rest, trusted=tool in _OWN_ACTIONS)
                return
        m = _TURN.match(first)
        if m:
            speaker = m.group("speaker").strip()
            a, c = m.group("a").strip(), m.group("b").strip()
            self.phase = m.group("phase")
            self._message(speaker, c if speaker == a else a, t, rest, as_int(m.group("turn")), "turn")
            return
        m = _START.match(first)
        if m:
            self._message(m.group("speaker").strip(), None, t, rest, None, "start_chat")
            return
        m = _OLD_TURN.match(first)
        if m:
            role, side, tail = m.group("role").strip(), m.group("side"), m.group("rest")
            if "sys message" in tail:
                self.roles[side] = role
                b.stats.records["sys message"] += 1
            elif "terminated the chat" in tail:
                b.add(
                    "orchestrator_decision",
                    role,
                    t,
                    role=role,
                    attrs={"kind": "terminate_chat", "phase": self.phase},
                )
            else:
                other = self.roles.get("User" if side == "Assistant" else "Assistant")
                turn = as_int(m.group("turn"))
                self._message(role, other if other != role else None, t, rest, turn, "turn")
            return
        b.stats.unknown[first[:40]] += 1

    def _number(self, key: str, text: str, line: int) -> float:
        """A [Post Info] number; a malformed (``1.2.3``) or overflowing (400 digits) one is the
        log's error at the entry's line: it was an internal error (ValueError), or an infinite cost."""
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise LoadError(
                "OT023",
                f"[Post Info] entry: {key}={text[:40]!r} is malformed or out of range (expected a finite number)",
                path=self.path,
                line=line,
            )
        return value

    def _phase(self, t: float, phase: str | None, assistant: str | None, user: str | None) -> None:
        self.phase = phase
        self.roles = {}
        attrs = {"kind": "phase", "phase": phase}
        if assistant:
            attrs["assistant_role"] = assistant
            self.roles["Assistant"] = assistant
        if user:
            attrs["user_role"] = user
            self.roles["User"] = user
        self.phase_event = self.b.add("orchestrator_decision", CHAIN, t, role="orchestrator", attrs=attrs)
        if self.last_msg is not None and not self.concluded:  # the chain moves on when the chat ends
            self.b.edge(self.last_msg, self.phase_event, "causal")
        self.last_msg = None
        self.concluded = False


def load(path: str | os.PathLike[str], *, keep_content: bool = False) -> Any:
    p = Path(path)
    require_nonempty(p)
    text = p.read_bytes().decode("utf-8", errors="replace")
    b = ImportStaging(keep_content=keep_content)
    run = _Run(b, str(p))
    n = 0
    for t, body, line in _entries(text, str(p)):
        n += 1
        run.entry(t, body, line)
    if n == 0:
        raise LoadError("OT006", "no ChatDev log entries found", path=str(p))
    if run.pending_usage != [0, 0] and b.events:
        run._give_usage(len(b.events) - 1)
    costs: dict[str, float] = {}
    if run.post.get("cost", -1) >= 0:
        costs["usd"] = run.post["cost"]
    if run.post.get("duration", -1) >= 0:
        costs["reported_duration_s"] = run.post["duration"]
    meta: dict[str, Any] = {
        "source_format": NAME,
        "source": str(p),
        "project": p.parent.name,
        "usage_blocks": run.usage_blocks,
    }
    if run.post:
        meta["post_info"] = run.post
    if "project_name" in run.meta:
        meta["project_name"] = run.meta["project_name"]
    if keep_content and "task_prompt" in run.meta:
        meta["task_prompt"] = redact(run.meta["task_prompt"])  # content kept, secrets redacted
    for name in ("ChatChainConfig.json", "PhaseConfig.json", "RoleConfig.json"):
        if (p.parent / name).is_file():
            meta.setdefault("configs", []).append(name)
    yield b.build(
        trace_id=f"chatdev:{p.parent.name}:{p.stem}",
        task_id=run.meta.get("project_name") or p.parent.name,
        system="chatdev",
        topology="mixed",
        costs=costs,
        metadata=meta,
    )
