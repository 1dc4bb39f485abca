"""Shared machinery for importers: a staging area that makes any foreign log a valid trace.

Foreign logs disagree with themselves: clocks skew between files, sub-agents log before the
spawn that created them, results carry the timestamp of a later flush. ``ImportStaging`` records
what the log says (absolute times, dependencies) and then repairs times once, along the dependency
graph, so that every edge goes forward in time, no spawned agent acts before its spawn and every
tool_result follows its tool_call. A repaired time keeps the original in ``attrs["t_src"]``.

Privacy: content is hashed into ``content_ref`` (``sha256:<hex>``) and only stored, with secrets
redacted, when the caller asks for it (``keep_content``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from itertools import islice
from typing import Any

import orjson

from ..core.build import TraceBuilder
from ..core.errors import LoadError
from ..core.limits import INT64_MAX, INT64_MIN, check_text, needs_exact_check
from ..core.model import SCHEMA_VERSION, Event, Trace, derived_costs
from ..core.order import successor_lists, topological_order
from ..core.read import iter_lines, open_read, split_format
from .redact import redact

# ---------------------------------------------------------------- privacy


def content_hash(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def as_text(value: Any) -> str:
    """A foreign content value (string, block list, object) as one string, deterministically."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, dict) and b.get("type") == "text" for b in value):
        return "\n".join(str(b.get("text", "")) for b in value)
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except orjson.JSONEncodeError:  # nested past orjson's writer, or an int past 64 bits
        return f"[{type(value).__name__} too deep or too large to keep as text]"


# ---------------------------------------------------------------- time


@lru_cache(maxsize=65536)
def parse_ts(value: str) -> float | None:
    """ISO-8601 timestamp -> POSIX seconds; None when unparseable."""
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError, TypeError):
        return None


# ---------------------------------------------------------------- foreign values

# Foreign logs hold whatever their writers (or attackers) put there: each value is read through
# one of these, so a wrong type degrades to "absent" (and is counted) instead of a crash.


def as_obj(value: Any) -> dict[str, Any]:
    """A value that should be a JSON object; anything else reads as an empty one."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """A value that should be a JSON array; anything else reads as an empty one."""
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    """An int64 from an int, an integral float or a decimal string (OTLP writes int64 as
    strings); None for anything else, a bool or a number past 64 bits."""
    if isinstance(value, str):
        text = value.strip()
        if not (text.lstrip("-").isdigit() and text.isascii() and len(text) <= 20):
            return None
        value = int(text)
    elif type(value) is float and value.is_integer() and abs(value) <= 2**63:
        value = int(value)
    if type(value) is int and INT64_MIN <= value <= INT64_MAX:
        return value
    return None


def as_count(value: Any, stats: ImportStats | None = None, what: str = "count") -> int:
    """A count (tokens, turns) as a non-negative int64 (see ``as_int``). Anything else is 0,
    noted in ``stats.bad_values[what]`` so the trace's metadata says what was not read."""
    n = as_int(value)
    if n is not None and n >= 0:
        return n
    if value is not None and stats is not None:
        stats.bad_values[what] += 1
    return 0


def ts_of(value: Any) -> float | None:
    if isinstance(value, str):
        return parse_ts(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


# ---------------------------------------------------------------- reading JSONL defensively


class ImportStats:
    """What an importer saw and skipped, reported into ``metadata["import"]``."""

    def __init__(self) -> None:
        self.records: Counter[str] = Counter()
        self.unknown: Counter[str] = Counter()
        self.bad_lines: list[int] = []
        self.truncated = False
        self.damaged_after: int | None = None  # a compressed stream that breaks after this line
        self.notes: list[str] = []
        self.bad_values: Counter[str] = Counter()  # values of the wrong type or range, not read

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"records": dict(self.records)}
        if self.unknown:
            d["unknown_records"] = dict(self.unknown)
        if self.bad_lines:
            d["bad_lines"] = self.bad_lines[:50]
            d["bad_line_count"] = len(self.bad_lines)
        if self.truncated:
            d["truncated"] = True
        if self.damaged_after is not None:
            d["compressed_stream_damaged_after_line"] = self.damaged_after
        if self.notes:
            d["notes"] = self.notes[:50]
        if self.bad_values:
            d["bad_values"] = dict(self.bad_values)
        return d


def iter_jsonl(path: str | os.PathLike[str], stats: ImportStats) -> Iterator[tuple[int, Any]]:
    """(line, object) of a JSONL file; bad lines are counted, a cut-off last line marks truncation.
    A damaged compressed stream is OT007 when it yields no line; after some lines it ends the
    records, noted in ``stats.damaged_after`` (what was read is kept, and said to be partial)."""
    p = os.fspath(path)
    pending: int | None = None
    lines, exact = _plain_lines(p)
    for n, line in lines if lines is not None else _lines_until_damage(p, stats):
        if not line.strip():
            continue
        if pending is not None:
            stats.bad_lines.append(pending)
            pending = None
        if n == 1:
            line = without_bom(line)
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            pending = n
            continue
        if exact and needs_exact_check(line) and check_text(line) is not None:
            stats.bad_values["record beyond the input limits"] += 1
            continue
        yield n, obj
    if pending is not None:
        stats.bad_lines.append(pending)
        stats.truncated = True


def _plain_lines(p: str) -> tuple[Iterator[tuple[int, bytes]] | None, bool]:
    """An uncompressed log is read whole (session logs are kilobytes to megabytes) and scanned
    once for long integers: (numbered lines, whether a line may need the exact check). A
    compressed one or a large one is streamed (None)."""
    if split_format(p)[1] is not None or not os.path.isfile(p) or os.path.getsize(p) > _WHOLE_FILE_BYTES:
        return None, True
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError:
        return None, True  # the streaming reader reports it
    return enumerate(data.split(b"\n"), 1), needs_exact_check(data)


_WHOLE_FILE_BYTES = 64 << 20


def _lines_until_damage(p: str, stats: ImportStats) -> Iterator[tuple[int, bytes]]:
    last = 0
    try:
        for last, line in iter_lines(p):  # noqa: B007 - last is read after a failure
            yield last, line
    except LoadError as e:
        if e.code != "OT007" or last == 0:
            raise
        stats.damaged_after = last


def require_nonempty(path: str | os.PathLike[str]) -> None:
    """Raise OT006 for an empty (or whitespace-only) file, so callers can report and continue."""
    p = os.fspath(path)
    try:
        size = os.path.getsize(p)
    except OSError as e:
        raise LoadError("OT001", f"cannot read: {e.strerror}", path=p) from None
    if size == 0:
        raise LoadError("OT006", "empty file: nothing to import", path=p)
    if size < 4096:
        with open(p, "rb") as f:
            if not f.read().strip():
                raise LoadError("OT006", "empty file (whitespace only): nothing to import", path=p)


def head_bytes(path: str | os.PathLike[str], n: int = 65536) -> bytes:
    """The first ``n`` bytes of a log's content, decompressed (``.gz``, ``.zst``), for sniffing;
    empty when the file cannot be read."""
    try:
        with open_read(os.fspath(path)) as f:
            return without_bom(f.read(n))
    except Exception:  # noqa: BLE001 - OSError, a corrupt stream (zlib.error, ZstdError): no head
        return b""


def without_bom(data: bytes) -> bytes:
    """``data`` without a leading UTF-8 byte-order mark (Windows editors write one; it carries
    no meaning, and left in it made the first record of a log unreadable)."""
    return data[3:] if data[:3] == b"\xef\xbb\xbf" else data


_LINE = re.compile(rb"[^\r\n]+")  # the non-empty lines of bytes.splitlines(): \n, \r, \r\n end one


def first_json_lines(path: str | os.PathLike[str], k: int = 5) -> list[Any]:
    """Up to ``k`` decoded leading lines of a JSONL file (for sniffing); undecodable lines skipped."""
    return list(islice(iter_head_json(path), k))


def iter_head_json(path: str | os.PathLike[str]) -> Iterator[Any]:
    """Decoded lines of a JSONL file's first 64 KB, one at a time (a sniffer that decides on the
    first record decodes only that one); undecodable lines skipped. Lines are found as they are
    asked for: splitting all 64 KB up front (and freeing the pieces) cost more than the sniffing."""
    for m in _LINE.finditer(head_bytes(path)):
        line = m.group()
        if not line.strip():
            continue
        try:
            yield orjson.loads(line)
        except orjson.JSONDecodeError:
            continue


# ---------------------------------------------------------------- staging


class ImportStaging:
    """Accumulates events and dependencies with source times, then repairs the times and hands
    the ordered events and forward edges to ``core.build.TraceBuilder`` for the Trace.

    Times given to :meth:`add` are absolute seconds (any epoch) or None ("same as the previous
    event"). Each agent's events are chained by temporal edges in insertion order.
    """

    def __init__(self, *, keep_content: bool = False) -> None:
        self.keep_content = keep_content
        self.events: list[Event] = []
        self.ts: list[float | None] = []
        self.edges: list[tuple[int, int, str]] = []
        self._implicit: list[tuple[int, int]] = []  # ordering constraints that are not edges
        self._last: dict[str, int] = {}
        self._spawn_of: dict[str, int] = {}
        self._spawner: dict[str, str] = {}
        self._calls: dict[str, int] = {}
        self._prev_ts: float | None = None
        self.stats = ImportStats()

    # -- events
    def add(
        self,
        type: str,
        agent: str,
        ts: float | None,
        *,
        content: Any = None,
        chain: bool = True,
        **fields: Any,
    ) -> int:
        if ts is None:
            ts = self._prev_ts
        else:
            self._prev_ts = ts
        i = len(self.events)
        if "from" in fields:
            fields["from_"] = fields.pop("from")
        ev = Event(id=f"e{i}", t=0.0, type=type, agent=agent, **fields)
        if content is not None:
            self.set_content(ev, content)
        self.events.append(ev)
        self.ts.append(ts)
        prev = self._last.get(agent)
        spawn = self._spawn_of.get(agent)
        if chain and prev is not None:
            self.edges.append((prev, i, "temporal"))
        elif prev is None and spawn is not None:
            self.edges.append((spawn, i, "spawn"))
        if spawn is not None:
            self._implicit.append((spawn, i))
        if chain or prev is None:
            self._last[agent] = i
        return i

    def set_content(self, ev: Event, content: Any) -> None:
        text = as_text(content)
        if not text:
            return
        ev.content_ref = content_hash(text)
        if self.keep_content:
            ev.content = redact(text)

    def edge(self, src: int | None, dst: int | None, type: str) -> None:
        if src is None or dst is None or src == dst:
            return
        self.edges.append((src, dst, type))

    def last_of(self, agent: str) -> int | None:
        return self._last.get(agent)

    # -- orchestration helpers
    def spawn(self, parent: str, child: str, ts: float | None, **fields: Any) -> int:
        """A spawn by ``parent`` of ``child``; the child's first event hangs under it."""
        i = self.add("spawn", parent, ts, to=child, **fields)
        if child not in self._spawn_of:
            self._spawn_of[child] = i
            self._spawner[child] = parent
            first = self._last.get(child)
            if first is not None:  # child already logged: keep the order, repair times later
                self._implicit.append((i, first))
        return i

    def annotate_spawn(self, child: str, attrs: dict[str, Any]) -> None:
        i = self._spawn_of.get(child)
        if i is not None:
            ev = self.events[i]
            ev.attrs = {**(ev.attrs or {}), **{k: v for k, v in attrs.items() if v is not None}}

    def spawner(self, child: str) -> str | None:
        return self._spawner.get(child)

    def is_spawned(self, agent: str) -> bool:
        return agent in self._spawn_of

    def ret(self, child: str, ts: float | None, **fields: Any) -> int:
        """The child's return to its spawner, after everything the child did."""
        parent = self._spawner.get(child, fields.pop("to", None) or "main")
        fields.pop("to", None)
        last = self._last.get(child)
        i = self.add("return", child, ts, chain=True, to=parent, **{"from": child}, **fields)
        if last is not None and (last, i, "temporal") in self.edges[-1:]:
            self.edges[-1] = (last, i, "return")
        return i

    def tool_call(self, agent: str, ts: float | None, tool: str, call_id: str, **fields: Any) -> int:
        i = self.add("tool_call", agent, ts, tool=tool, call_id=call_id, **fields)
        self._calls[call_id] = i
        return i

    def tool_result(self, agent: str, ts: float | None, tool: str | None, call_id: str, **fields: Any) -> int:
        """A tool result; without a known call it is kept as a message (never an invalid result)."""
        call = self._calls.get(call_id)
        if call is None:
            attrs = dict(fields.pop("attrs", None) or {})
            attrs["kind"] = "orphan_tool_result"
            attrs["call_id"] = call_id
            self.stats.records["orphan_tool_result"] += 1
            return self.add("message", agent, ts, tool=tool, attrs=attrs, **fields)
        fields.setdefault("trusted", False)  # tool output is outside data: the survey's untrusted flow source
        i = self.add("tool_result", agent, ts, tool=tool or self.events[call].tool, call_id=call_id, **fields)
        self.edges.append((call, i, "tool_dependency"))
        return i

    # -- finishing
    def build(
        self,
        *,
        trace_id: str,
        task_id: str,
        system: str,
        topology: str | None = None,
        rewards: dict[str, float] | None = None,
        costs: dict[str, float] | None = None,
        metrics: dict[str, float] | None = None,
        metadata: dict[str, Any] | None = None,
        t0: float | None = None,
    ) -> Trace:
        if not self.events:
            raise LoadError("OT106", "no events could be imported from this log", path=trace_id)
        n = len(self.events)
        known = [x for x in self.ts if x is not None]
        base = min(known) if known else 0.0
        if t0 is not None:
            base = min(base, t0)
        raw = [(x - base) if x is not None else 0.0 for x in self.ts]
        # forward-fill missing times from the previous known one
        last = 0.0
        for i, x in enumerate(self.ts):
            if x is None:
                raw[i] = last
            last = raw[i]
        pairs = [(a, b) for a, b, _ in self.edges] + self._implicit
        # with every pair pointing forward (nearly always), the lowest-index-first order is the
        # insertion order itself: no walk
        forward = all(a < b for a, b in pairs)
        order = list(range(n)) if forward else topological_order(successor_lists(n, pairs), break_cycles=True)
        t = list(raw)
        preds: list[list[int]] = [[] for _ in range(n)]
        for a, b, _ in self.edges:
            preds[b].append(a)
        for a, b in self._implicit:
            preds[b].append(a)
        for i in order:
            for a in preds[i]:
                if t[a] > t[i]:
                    t[i] = t[a]
        pos = [0] * n
        for k, v in enumerate(order):
            pos[v] = k
        ranked = sorted(order, key=t.__getitem__)  # stable: equal times keep the dependency order
        new_id = [""] * n
        rank = [0] * n
        for k, old in enumerate(ranked):
            new_id[old] = f"e{k}"
            rank[old] = k
        built = TraceBuilder()
        for old in ranked:
            ev = self.events[old]
            ev.id = new_id[old]
            ev.t = round(t[old], 6)
            if ev.t_end is not None:
                ev.t_end = round(max(ev.t_end - base, ev.t), 6)
            if t[old] - raw[old] > 1e-6:
                ev.attrs = {**(ev.attrs or {}), "t_src": round(raw[old], 6)}
            built.add(ev)
        seen: set[tuple[int, int, str]] = set()
        for a, b, ty in self.edges:
            if pos[a] < pos[b] and (a, b, ty) not in seen:
                seen.add((a, b, ty))
                built.edge(new_id[a], new_id[b], ty)
        for a, b, ty in _message_links(ranked, self.events):  # kept only when forward in time
            if t[a] <= t[b] and rank[a] < rank[b] and (a, b, ty) not in seen:
                seen.add((a, b, ty))
                built.edge(new_id[a], new_id[b], ty)
        events = built.events
        all_costs = derived_costs(events)
        all_costs["tokens_in"] = sum(e.tokens_in or 0 for e in events)
        all_costs["tokens_out"] = sum(e.tokens_out or 0 for e in events)
        if costs:
            all_costs.update(costs)
        meta = dict(metadata or {})
        meta["import"] = {**meta.get("import", {}), **self.stats.to_dict()}
        meta.setdefault("t0_unix", base if known else None)
        return built.trace(
            trace_id=trace_id,
            task_id=task_id,
            rewards=rewards or {},
            costs=all_costs,
            system=system,
            topology=topology,
            metrics=metrics,
            schema_version=SCHEMA_VERSION,
            metadata=meta,
        )

    def finish_call(
        self,
        call_id: str,
        ts: float | None,
        *,
        status: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        """Record the result of a call that did not become a tool_call (decision, message)."""
        i = self._calls.get(call_id)
        if i is None:
            return
        ev = self.events[i]
        if ts is not None:
            ev.t_end = ts  # absolute; made relative in build
        if status is not None:
            ev.status = status
        if attrs:
            ev.attrs = {**(ev.attrs or {}), **attrs}

    def register_call(self, call_id: str, index: int) -> None:
        self._calls[call_id] = index


def _message_links(ranked: list[int], events: list[Event]) -> list[tuple[int, int, str]]:
    """A ``message`` edge from each message (or return) to the receiver's next event."""
    out: list[tuple[int, int, str]] = []
    waiting: dict[str, list[int]] = {}
    for i in ranked:  # time order
        ev = events[i]
        for src in waiting.pop(ev.agent, ()):
            out.append((src, i, "return" if events[src].type == "return" else "message"))
        if ev.type in ("message", "return") and ev.to and ev.to != ev.agent:
            waiting.setdefault(ev.to, []).append(i)
    return out
