"""The one way a producer assembles a trace: append each event with the typed edges that lead
into it, then finish the Trace. The generator, the learning environments, the importers and the
runtime recorder all build on :class:`TraceBuilder`, so the rules of assembly (an edge points at
the event being added; an agent's events are chained) live here once.
"""

from __future__ import annotations

from typing import Any

from .model import Edge, Event, Trace


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
        if chain is not None:
            prev = self._last.get(ev.agent)
            if prev is not None and all(src != prev for src, _ in after):
                self.edges.append(Edge(prev, ev.id, chain))
        self.events.append(ev)
        self.edges.extend(Edge(src, ev.id, type) for src, type in after)
        self._last[ev.agent] = ev.id
        return ev.id

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
