"""Trace accessors shared by reward, credit and learn: event attributes as numbers, who spawned
whom, tool calls paired with their results."""

from __future__ import annotations

from typing import Any

from .model import Event, Trace


def attr(e: Event, *keys: str) -> Any:
    """First present key among ``e.attrs[k]`` then ``e.extra[k]``; None when absent."""
    for src in (e.attrs, e.extra):
        if src:
            for k in keys:
                v = src.get(k)
                if v is not None:
                    return v
    return None


def num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None


def spawned(trace: Trace) -> dict[str, Event]:
    """Sub-agent name -> the (first) spawn event that created it."""
    out: dict[str, Event] = {}
    for e in sorted(trace.events, key=lambda e: e.t):
        if e.type == "spawn" and e.to and e.to not in out:
            out[e.to] = e
    return out


def tool_pairs(trace: Trace) -> list[tuple[Event, Event | None]]:
    """Each tool_call with its tool_result: by ``call_id``, else the first later open result of the same tool."""
    calls = [e for e in trace.events if e.type == "tool_call"]
    results = sorted((e for e in trace.events if e.type == "tool_result"), key=lambda e: e.t)
    by_id = {r.call_id: r for r in results if r.call_id}
    used: set[str] = set()
    pairs: list[tuple[Event, Event | None]] = []
    for c in sorted(calls, key=lambda e: e.t):
        r = by_id.get(c.call_id) if c.call_id else None
        if r is None:
            r = next(
                (
                    x
                    for x in results
                    if x.id not in used and not x.call_id and x.tool == c.tool and x.t >= c.t
                ),
                None,
            )
        if r is not None:
            used.add(r.id)
        pairs.append((c, r))
    return pairs
