"""Recording SDK: turn any Python multi-agent program (sync or async) into a streaming event log.

Every event is appended to the log and flushed at once (``EventLogWriter``), so a process killed
with SIGKILL loses at most the event being written; ``repair`` turns what is left into a trace.

Causal edges come from the call structure: each event gets an edge from the previous event of
the same execution context (a ``contextvars`` cursor, so threads and asyncio tasks each follow
their own chain, and a task starts from the event that created it). ``after=`` adds edges by hand.
Edge types follow the event types they join (``core.build.infer_edge_type``).

Clocks: ``"wall"`` (seconds since the recorder started) or ``"logical"`` (``t`` is the event's
index, so the same program with the same seed writes byte-identical logs). With a ``reference``
(a recorded trace, used by replay and fork) events take the reference's times as long as they
match it, and ``wait_turn`` lets replayed calls complete in the recorded order.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any, Literal

import orjson

from ..core.build import TraceBuilder, infer_edge_type
from ..core.io import EventLogWriter
from ..core.model import SCHEMA_VERSION, Edge, Event, Trace, derived_costs

Clock = Literal["wall", "logical"]
ROOT_AGENT = "orchestrator"


class Recorder:
    """Records one run. Use as ``with Recorder(path) as rec:`` (or ``async with``)."""

    def __init__(
        self,
        path: str | None = None,
        *,
        task_id: str = "task",
        trace_id: str | None = None,
        system: str = "orchestrace.runtime",
        topology: str | None = None,
        metadata: dict[str, Any] | None = None,
        fsync: str | int = "never",
        clock: Clock = "wall",
        reference: Trace | None = None,
        root_agent: str = ROOT_AGENT,
        fresh_ids: tuple[int, int] | None = None,
    ) -> None:
        self.path = path
        self.task_id = task_id
        self.trace_id = trace_id or uuid.uuid4().hex
        self.system = system
        self.topology = topology
        self.metadata = dict(metadata or {})
        self.clock = clock
        self.root_agent = root_agent
        self._built = TraceBuilder()
        self.events: list[Event] = self._built.events  # the builder's own lists, never replaced
        self.edges: list[Edge] = self._built.edges
        self.rewards: dict[str, float] = {}
        self.metrics: dict[str, float] = {}
        self._index: dict[str, int] = {}
        self._lock = threading.RLock()
        self._t0 = time.perf_counter()
        self._cursor: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"cursor{id(self)}", default=None
        )
        self._agent: contextvars.ContextVar[str] = contextvars.ContextVar(
            f"agent{id(self)}", default=root_agent
        )
        self._writer: EventLogWriter | None = None
        self._fsync = fsync
        self._closed = False
        # replay / fork state
        self.reference = reference.events if reference is not None else None
        self.diverged_at: int | None = None
        self._div_wall = 0.0
        self._div_base = 0.0
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self.interventions: list[Any] = []
        self._fresh_ids = fresh_ids

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> Recorder:
        if self.path is not None and self._writer is None:
            header: dict[str, Any] = {
                "schema_version": SCHEMA_VERSION,
                "trace_id": self.trace_id,
                "task_id": self.task_id,
            }
            header["system"] = self.system
            if self.topology is not None:
                header["topology"] = self.topology
            if self.metadata:
                header["metadata"] = self.metadata
            self._writer = EventLogWriter(self.path, header, fsync=self._fsync)
        return self

    def close(self) -> None:
        """Write the end-of-run fields (costs, rewards, metrics, metadata) and close the log."""
        if self._closed:
            return
        self._closed = True
        if self._writer is not None:
            fields: dict[str, Any] = {"costs": self.costs()}
            if self.rewards:
                fields["rewards"] = self.rewards
            if self.metrics:
                fields["metrics"] = self.metrics
            if self.metadata:
                fields["metadata"] = self.metadata
            self._writer.update(**fields)
            self._writer.close()

    def __enter__(self) -> Recorder:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Recorder:
        return self.open()

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def costs(self) -> dict[str, float]:
        if not self.events:
            return {"tokens": 0, "wall_clock_s": 0.0}
        return derived_costs(self.events)

    def trace(self) -> Trace:
        """The run so far as a Trace (in memory; the log on disk holds the same records)."""
        return self._built.trace(
            trace_id=self.trace_id,
            task_id=self.task_id,
            rewards=dict(self.rewards),
            costs=self.costs(),
            system=self.system,
            topology=self.topology,
            metrics=dict(self.metrics) or None,
            schema_version=SCHEMA_VERSION,
            metadata=dict(self.metadata) or None,
        )

    # ------------------------------------------------------------------ clock

    def now(self) -> float:
        """Seconds on this run's clock. While a replay still matches its reference, the reference's
        clock: the time its next event happened, so budgets fire where they fired."""
        if self.clock == "logical":
            return float(len(self.events))
        wall = time.perf_counter() - self._t0
        if self.reference is None:
            return round(wall, 6)
        if self.diverged_at is None:  # the recorded clock: when the recording made its next event
            i = len(self.events)
            return self.reference[i].t if i < len(self.reference) else self._last_t()
        return round(self._div_base + (wall - self._div_wall), 6)

    def _last_t(self) -> float:
        if not self.events:
            return 0.0
        e = self.events[-1]
        return e.t_end if e.t_end is not None else e.t

    @property
    def count(self) -> int:
        return len(self.events)

    @property
    def current_agent(self) -> str:
        return self._agent.get()

    @property
    def cursor(self) -> str | None:
        return self._cursor.get()

    def set_cursor(self, event_id: str | None) -> None:
        self._cursor.set(event_id)

    # ------------------------------------------------------------------ emitting

    def emit(
        self,
        type: str,
        agent: str | None = None,
        *,
        after: str | Iterable[str] | None = None,
        edge_type: str | None = None,
        chain: bool = True,
        start: float | None = None,
        at: tuple[float, float | None] | None = None,
        **fields: Any,
    ) -> str:
        """Append one event; returns its id. ``after`` adds edges from those events, and
        ``chain`` an edge from this context's previous event. ``start`` (a ``now()`` reading)
        makes the event span from then to now; ``at`` = (t, t_end) on the wall clock places an
        event learned of afterwards (a span that reports a past tool call) where it happened.
        Fields are Event fields (``from_``, ``to``, ``content``, ``tokens_in``, ``attrs``...)."""
        agent = agent or self._agent.get()
        srcs: list[str] = []
        if chain and (c := self._cursor.get()) is not None:
            srcs.append(c)
        if after is not None:
            for s in [after] if isinstance(after, str) else after:
                if s not in srcs:
                    srcs.append(s)
        with self._lock:
            i = len(self.events)
            eid = self._id_for(i)
            t_end: float | None = None
            if self.clock == "logical":
                t = float(i)
            elif at is not None:
                t, t_end = at
            else:
                t = round(time.perf_counter() - self._t0, 6) if self.reference is None else self.now()
                if start is not None:
                    t, t_end = min(start, t), t
            ev = Event(id=eid, t=t, type=type, agent=agent, t_end=t_end, **fields)
            if self.reference is not None:
                self._follow_reference(i, ev)
            ev_edges = []
            for s in srcs:
                j = self._index.get(s)
                if j is None:
                    continue
                src = self.events[j]
                if src.t > ev.t:  # a cause cannot start after its effect: start the effect then
                    ev.t = src.t
                    if ev.t_end is not None and ev.t_end < ev.t:
                        ev.t_end = ev.t
                ev_edges.append(Edge(s, eid, edge_type or infer_edge_type(src.type, type)))
            self._built.append(ev, ev_edges)
            self._index[eid] = i
            if self._writer is not None:
                self._writer.record(ev, ev_edges)
        self._cursor.set(eid)
        if self._waiters:
            self._wake(i + 1)
        return eid

    def _id_for(self, i: int) -> str:
        """``e{i}``; in a fork (``fresh_ids`` = (fork index k, first fresh number)) the prefix
        keeps the parent's ids and event k on gets numbers the parent never used, so an id
        shared by parent and fork always names the same event."""
        if self._fresh_ids is None:
            return f"e{i}"
        k, base = self._fresh_ids
        if i < k and self.reference is not None and i < len(self.reference):
            return self.reference[i].id
        return f"e{base + i - k}"

    def index_of(self, event_id: str) -> int:
        """Position of a recorded event in this run."""
        return self._index[event_id]

    def edge(self, src: str, dst: str, type: str = "causal") -> None:
        """Add an edge by hand between two recorded events."""
        with self._lock:
            self._built.edge(src, dst, type)
            if self._writer is not None:
                self._writer.edge(src, dst, type)

    def event(self, event_id: str) -> Event:
        return self.events[self._index[event_id]]

    # ------------------------------------------------------------------ reference (replay / fork)

    def _follow_reference(self, i: int, ev: Event) -> None:
        ref = self.reference
        assert ref is not None
        if self.diverged_at is None:
            r = ref[i] if i < len(ref) else None
            same = r is not None and (r.type, r.agent, r.content, r.status, r.to) == (
                ev.type,
                ev.agent,
                ev.content,
                ev.status,
                ev.to,
            )
            if same:
                assert r is not None
                ev.t, ev.t_end = r.t, r.t_end
                return
            self.diverged_at = i
            self._div_wall = time.perf_counter() - self._t0
            self._div_base = self._last_t()
            for ws in self._waiters.values():
                for w in ws:
                    if not w.done():
                        w.set_result(None)
            self._waiters.clear()
        if self.clock == "wall":
            ev.t = self.now() if ev.t_end is None else ev.t
            if ev.t_end is not None:
                ev.t_end = max(ev.t, self.now())

    def reference_index(self, predicate: Callable[[Event], bool]) -> int | None:
        """Index of the first reference event matching ``predicate``."""
        for i, e in enumerate(self.reference or ()):
            if predicate(e):
                return i
        return None

    async def wait_turn(self, index: int, timeout: float = 10.0) -> None:
        """Wait until ``index`` events exist (replay: deliver results in the recorded order)."""
        if self.reference is None or self.diverged_at is not None or len(self.events) >= index:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(index, []).append(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass

    def _wake(self, count: int) -> None:
        ws = self._waiters.pop(count, None)
        for w in ws or ():
            if not w.done():
                w.get_loop().call_soon_threadsafe(_set_done, w)

    # ------------------------------------------------------------------ high-level events

    def decision(self, decision: str, value: Any = None, *, agent: str | None = None, **kw: Any) -> str:
        """An orchestrator decision (spawn, delegate, communicate, aggregate, stop, ...)."""
        attrs = {
            "decision": decision,
            **({"value": _plain(value)} if value is not None else {}),
            **kw.pop("attrs", {}),
        }
        return self.emit("orchestrator_decision", agent, attrs=attrs, **kw)

    def spawn(self, child: str, *, role: str | None = None, parent: str | None = None, **kw: Any) -> str:
        parent = parent or self._agent.get()
        return self.emit("spawn", parent, to=child, role=role, parent=parent, **kw)

    def despawn(self, child: str, *, parent: str | None = None, reason: str = "done", **kw: Any) -> str:
        attrs = {"reason": reason, **kw.pop("attrs", {})}
        return self.emit("despawn", parent or self._agent.get(), to=child, attrs=attrs, **kw)

    def message(self, content: str, *, to: str | None = None, frm: str | None = None, **kw: Any) -> str:
        frm = frm or self._agent.get()
        return self.emit("message", frm, from_=frm, to=to, content=content, **kw)

    def ret(self, content: str | None, *, to: str | None = None, frm: str | None = None, **kw: Any) -> str:
        """A sub-agent hands its result back (``to`` defaults to the root agent)."""
        frm = frm or self._agent.get()
        return self.emit("return", frm, from_=frm, to=to or self.root_agent, content=content, **kw)

    def aggregate(self, content: str | None, inputs: Iterable[str] = (), **kw: Any) -> str:
        return self.emit("aggregate", kw.pop("agent", None), after=list(inputs), content=content, **kw)

    def intervention(self, content: str, *, agent: str = "human", **kw: Any) -> str:
        return self.emit("human_intervention", agent, content=content, **kw)

    def safety(self, content: str, *, agent: str | None = None, **kw: Any) -> str:
        return self.emit("safety_event", agent, content=content, **kw)

    def stop(self, reason: str = "done", **kw: Any) -> str:
        return self.decision("stop", reason, **kw)

    # ------------------------------------------------------------------ scopes

    def agent(self, name: str, *, role: str | None = None, parent: str | None = None) -> AgentScope:
        """``with rec.agent("w1", role="worker"):`` spawn on enter, despawn on exit."""
        return AgentScope(self, name, role, parent)

    def tool_call(self, tool: str, args: Any = None, *, agent: str | None = None) -> ToolScope:
        """``with rec.tool_call("search", q) as call: call.result(r)``."""
        return ToolScope(self, tool, args, agent)

    def tool(self, name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: each call of the function is a tool_call and its tool_result (sync or async)."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            tname = name or fn.__name__
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def aw(*a: Any, **k: Any) -> Any:
                    with self.tool_call(tname, _call_args(a, k)) as call:
                        return call.result(await fn(*a, **k))

                return aw

            @functools.wraps(fn)
            def w(*a: Any, **k: Any) -> Any:
                with self.tool_call(tname, _call_args(a, k)) as call:
                    return call.result(fn(*a, **k))

            return w

        return deco

    def agent_fn(
        self, name: str | None = None, *, role: str | None = None
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: the function runs as a spawned agent; its return value is its ``return`` event."""

        def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
            aname = name or fn.__name__
            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def aw(*a: Any, **k: Any) -> Any:
                    async with self.agent(aname, role=role) as scope:
                        out = await fn(*a, **k)
                        scope.ret(out)
                        return out

                return aw

            @functools.wraps(fn)
            def w(*a: Any, **k: Any) -> Any:
                with self.agent(aname, role=role) as scope:
                    out = fn(*a, **k)
                    scope.ret(out)
                    return out

            return w

        return deco


def _set_done(f: asyncio.Future[None]) -> None:
    if not f.done():
        f.set_result(None)


def _plain(v: Any) -> Any:
    if isinstance(v, str | int | float | bool) or v is None:
        return v
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)


def _call_args(a: tuple[Any, ...], k: dict[str, Any]) -> Any:
    if not k and len(a) == 1:
        return a[0]
    return {"args": list(a), **k} if k else list(a)


def to_text(v: Any) -> str | None:
    """Event content for an arbitrary value: strings as is, the rest as compact JSON."""
    if v is None or isinstance(v, str):
        return v
    try:
        return orjson.dumps(v, default=str).decode()
    except TypeError:
        return str(v)


class AgentScope:
    """Spawn on enter, despawn on exit (reason ``cancelled`` / ``error`` when it ends that way)."""

    def __init__(self, rec: Recorder, name: str, role: str | None, parent: str | None) -> None:
        self.rec, self.name, self.role, self.parent = rec, name, role, parent
        self._token: contextvars.Token[str] | None = None
        self.spawn_id = ""

    def __enter__(self) -> AgentScope:
        rec = self.rec
        self.parent = self.parent or rec.current_agent
        self.spawn_id = rec.spawn(self.name, role=self.role, parent=self.parent)
        self._token = rec._agent.set(self.name)
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: Any) -> None:
        rec = self.rec
        if self._token is not None:
            rec._agent.reset(self._token)
        reason = "done"
        if et is not None:
            reason = "cancelled" if issubclass(et, asyncio.CancelledError | KeyboardInterrupt) else "error"
        rec.despawn(
            self.name, parent=self.parent, reason=reason, **({"status": "error"} if reason == "error" else {})
        )

    async def __aenter__(self) -> AgentScope:
        return self.__enter__()

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: Any) -> None:
        self.__exit__(et, ev, tb)

    def message(self, content: str, *, to: str | None = None, **kw: Any) -> str:
        return self.rec.message(content, to=to, frm=self.name, **kw)

    def ret(self, value: Any, **kw: Any) -> str:
        return self.rec.ret(to_text(value), to=self.parent, frm=self.name, role=self.role, **kw)


class ToolScope:
    """A tool call: ``tool_call`` on enter, ``tool_result`` on exit (status error on exception)."""

    _seq = 0

    def __init__(self, rec: Recorder, tool: str, args: Any, agent: str | None) -> None:
        self.rec, self.tool, self.args, self.agent = rec, tool, args, agent
        self.value: Any = None
        self.has_value = False
        self.call_id = ""
        self.trusted: bool | None = None

    def __enter__(self) -> ToolScope:
        rec = self.rec
        self.agent = self.agent or rec.current_agent
        self.call_id = f"c{rec.count}"
        rec.emit("tool_call", self.agent, tool=self.tool, call_id=self.call_id, content=to_text(self.args))
        return self

    def result(self, value: Any, *, trusted: bool | None = None) -> Any:
        self.value, self.has_value, self.trusted = value, True, trusted
        return value

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: Any) -> None:
        kw: dict[str, Any] = {"tool": self.tool, "call_id": self.call_id}
        if self.trusted is not None:
            kw["trusted"] = self.trusted
        if et is not None:
            self.rec.emit("tool_result", self.agent, content=f"{et.__name__}: {ev}", status="error", **kw)
        else:
            self.rec.emit("tool_result", self.agent, content=to_text(self.value), **kw)

    async def __aenter__(self) -> ToolScope:
        return self.__enter__()

    async def __aexit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: Any) -> None:
        self.__exit__(et, ev, tb)
