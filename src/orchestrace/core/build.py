"""The one way a producer assembles a trace: append each event with the typed edges that lead
into it, then finish the Trace. The generator, the learning environments, the importers and the
runtime recorder all build on :class:`TraceBuilder`, so the rules of assembly (an edge points at
the event being added; an agent's events are chained) live here once.
"""

from __future__ import annotations

from typing import Any

from .model import Edge, Event, Trace


def infer_edge_type(src_type: str, dst_type: str) -> str:
    """The type of an edge no one named, from the types of the events it joins."""
    if dst_type == "spawn":
        return "spawn"
    if src_type == "tool_call" and dst_type == "tool_result":
        return "return"
    if dst_type == "tool_call":
        return "tool_dependency"
    if dst_type == "aggregate":
        return "aggregate"
    if src_type == "return":
        return "return"
    if "safety_event" in (src_type, dst_type):
        return "safety_flow"
    if src_type == "message":
        return "message"
    return "causal"


class TraceBuilder:
    """Events in the order they are added and the edges into them."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.edges: list[Edge] = []
        self._last: dict[str, str] = {}  # agent -> id of its latest event

    def add(self, ev: Event, *after: tuple[str, str], chain: str | None = None) -> str:
        """Append ``ev`` with an edge from each ``(source id, edge type)`` of ``after``; returns
        its id. ``chain``: first an edge of that type from the agent's previous event, unless that
        event is already a source."""
        eid = ev.id
        if chain is not None:
            prev = self._last.get(ev.agent)
            if prev is not None and all(src != prev for src, _ in after):
                self.edges.append(Edge(prev, eid, chain))
        self.events.append(ev)
        for src, type in after:  # a loop: a comprehension costs more per call (recorder bench)
            self.edges.append(Edge(src, eid, type))
        self._last[ev.agent] = eid
        return eid

    def append(self, ev: Event, edges: list[Edge]) -> None:
        """Append ``ev`` with its incoming edges already made (the recorder's hot path: one call,
        no pairs to unpack)."""
        self.events.append(ev)
        self.edges.extend(edges)
        self._last[ev.agent] = ev.id

    def edge(self, src: str, dst: str, type: str) -> Edge:
        """An edge between two events already added (when it is known only later)."""
        e = Edge(src, dst, type)
        self.edges.append(e)
        return e

    def last(self, agent: str) -> str | None:
        """Id of the agent's latest event, None before its first."""
        return self._last.get(agent)

    def trace(self, *, trace_id: str, task_id: str, **top: Any) -> Trace:
        """The trace of the events and edges so far (events added later do not join it); ``top``:
        the other Trace fields."""
        return Trace(
            trace_id=trace_id, task_id=task_id, events=list(self.events), edges=list(self.edges), **top
        )
