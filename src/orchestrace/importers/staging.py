"""The staging area every importer builds its trace in: it makes any foreign log a valid trace.

Foreign logs disagree with themselves: clocks skew between files, sub-agents log before the
spawn that created them, results carry the timestamp of a later flush. ``ImportStaging`` records
what the log says (absolute times, dependencies) and then repairs times once, along the dependency
graph, so that every edge goes forward in time, no spawned agent acts before its spawn and every
tool_result follows its tool_call. A repaired time keeps the original in ``attrs["t_src"]``.

Privacy: content is hashed into ``content_ref`` (``sha256:<hex>``) and only stored, with secrets
redacted, when the caller asks for it (``keep_content``).
"""

from __future__ import annotations

from typing import Any

from ..core.build import TraceBuilder
from ..core.errors import LoadError
from ..core.model import SCHEMA_VERSION, Event, Trace, derived_costs
from ..core.order import successor_lists, topological_order
from ..core.paths import utf8_path
from .reading import ImportStats
from .redact import redact
from .values import as_text, content_hash

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
        # a log whose file name is not UTF-8 (its path in metadata.source, a name in the trace id):
        # the trace could not be written ("str is not valid UTF-8", exit 3); its bytes are escaped
        if isinstance(meta.get("source"), str):
            meta["source"] = utf8_path(meta["source"])
        trace_id, task_id = utf8_path(trace_id), utf8_path(task_id)
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
